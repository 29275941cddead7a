# The e2e suite on kind and on the local control plane. No `##@` header: make help lists these
# targets under Test (make/test.mk, included just before).
#
# The e2e suite (test/e2e) runs on the local control plane in `make test` (test/e2e/local) and, for
# those with Docker, on kind: a cluster named $KIND_CLUSTER, cert-manager $(CERTMANAGER_VERSION) from
# its release, the image loaded, then the same cases (test/e2e/kind), each deploying its overlay.
# test-e2e-sources runs it where no image registry is reachable (docs/e2e.md): the kind node image,
# cert-manager's images and manifests and every other image built here, kind's --privileged mapped by
# hack/kind/bin/docker. KIND_IMAGE and KIND_CONFIG choose the node image and the cluster config.
KIND ?= kind
KIND_IMAGE ?=
KIND_CONFIG ?= test/e2e/kind/cluster.yaml
# The kind cluster's API server authenticates to the webhooks (docs/e2e.md, docs/security.md#webhook-callers):
# hack/kind/webhookauth writes a client CA, kube-apiserver's client certificate and its AdmissionConfiguration
# into KIND_WEBHOOK_AUTH, which KIND_CONFIG mounts into the node (the path, relative to the repository's root,
# is the one the cluster configs of test/e2e/kind name); the suite deploys every case with the CA
# (config/components/webhook-client-ca). KIND_WEBHOOK_CLIENT_AUTH=0 runs without, for a KIND_CONFIG of yours
# that mounts nothing.
KIND_WEBHOOK_CLIENT_AUTH ?= 1
KIND_WEBHOOK_AUTH := .local/kind-webhook-auth
KIND_AUTH := $(filter 1,$(KIND_WEBHOOK_CLIENT_AUTH))
CERTMANAGER_MANIFEST ?= https://github.com/cert-manager/cert-manager/releases/download/$(CERTMANAGER_VERSION)/cert-manager.yaml
# NetworkPolicies are enforced by kind's kindnetd; where it cannot run (test-e2e-sources), KIND_NETWORK_POLICY
# is the manifest of the DaemonSet kube-system/kube-router that enforces them instead (test/e2e/kind/kube-router.yaml).
KIND_NETWORK_POLICY ?=
# The image of the suite's probe Pods, which open connections from inside the pod network: it needs bash.
E2E_PROBE_IMAGE ?= docker.io/library/bash:5.2
KIND_ENV = GO=$(GO) KIND='$(KIND)' KIND_CLUSTER='$(KIND_CLUSTER)' KIND_IMAGE='$(KIND_IMAGE)' KIND_CONFIG='$(KIND_CONFIG)' \
	KIND_AUTH='$(KIND_AUTH)' KIND_WEBHOOK_AUTH='$(KIND_WEBHOOK_AUTH)' KIND_KUBECONFIG=$(LOCAL)/kind-kubeconfig \
	CERTMANAGER_MANIFEST='$(CERTMANAGER_MANIFEST)' IMAGE_ARCHIVE=$(IMAGE_ARCHIVE) KIND_NETWORK_POLICY='$(KIND_NETWORK_POLICY)'

.PHONY: test-e2e
test-e2e: image testdata $(HELM_STAMP) ## End-to-end suite on a kind cluster (needs Docker and kind; not run by `make test`).
	@$(KIND_ENV) hack/kind/cluster.sh
	IMG=$(IMG) KUBECONFIG=$(LOCAL)/kind-kubeconfig $(if $(KIND_AUTH),E2E_WEBHOOK_AUTH_DIR=$(ROOT)/$(KIND_WEBHOOK_AUTH)) \
	E2E_PROBE_IMAGE=$(E2E_PROBE_IMAGE) E2E_HELM=$(BIN)/helm $(GO) test -tags e2e_kind -count=1 -timeout 30m -v ./test/e2e/kind/

KIND_NODE_IMAGE := cos-kind-node:$(KUBE_VERSION)
KIND_WORK := $(BIN)/kind
KIND_CERTMANAGER_MANIFEST := $(KIND_WORK)/cert-manager.yaml
# etcd's image tag is its version (kubeadm asks for its own; the kind config sets it); pause's is the
# one of the pinned Kubernetes' build/pause.
ETCD_IMAGE_TAG := $(patsubst v%,%,$(ETCD_VERSION))-0
PAUSE_TAG = $(shell awk '$$1=="TAG" && $$2=="?=" {print $$3}' $$(cd $(CONTROLPLANE_DIR) && $(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/Makefile)

.PHONY: kind-host
kind-host: ## Install Docker and debootstrap from apt if missing, and start dockerd if none answers (for test-e2e-sources).
	@hack/kind/host.sh

.PHONY: kube-router
kube-router: $(KUBEROUTER_STAMP) ## Build kube-router into bin/kube-router/ (the NetworkPolicy enforcer of test-e2e-sources' cluster).

.PHONY: kind-node-image
kind-node-image: control-plane certmanager $(KIND_TOOLS_STAMP) $(KUBEROUTER_STAMP) kind-host ## Build the kind node image $(KIND_NODE_IMAGE) and every image it runs from sources, nothing pulled (hack/kind/build-node-image.sh).
	OUT=$(KIND_WORK) DOCKER=docker NODE_IMAGE=$(KIND_NODE_IMAGE) \
	KIND_MODULE_DIR=$$(cd hack/tools/kind && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kind) \
	KUBE_MODULE_DIR=$$(cd $(CONTROLPLANE_DIR) && $(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes) \
	KUBE_VERSION=$(KUBE_VERSION) KUBE_BIN=$(BIN) NODE_BIN=$(KIND_TOOLS) ETCD_BIN=$(BIN)/etcd ETCD_TAG=$(ETCD_IMAGE_TAG) \
	COREDNS_BIN=$(KIND_TOOLS)/coredns COREDNS_TAG=$(COREDNS_VERSION) PAUSE_TAG=$(PAUSE_TAG) \
	CERTMANAGER_BIN=$(BIN) CERTMANAGER_VERSION=$(CERTMANAGER_VERSION) CERTMANAGER_IMAGE_PREFIX=cos-e2e.local \
	KUBEROUTER_BIN=$(KUBEROUTER_DIR)/kube-router KUBEROUTER_IMAGE=$(KUBEROUTER_IMAGE) POD_NETWORK_SCRIPT=hack/kind/pod-network.sh \
		hack/kind/build-node-image.sh

$(KIND_CERTMANAGER_MANIFEST): $(HELM_STAMP) $(CONTROLPLANE_STAMP) hack/kind/certmanager-manifest.sh test/e2e/kind/certmanager/kustomization.yaml $(CONTROLPLANE_DIR)/go.mod
	@mkdir -p $(KIND_WORK)
	HELM=$(BIN)/helm KUBECTL=$(BIN)/kubectl VERSION=$(CERTMANAGER_VERSION) IMAGE_PREFIX=cos-e2e.local OUT_FILE=$@ \
	CHART=$$(cd $(CONTROLPLANE_DIR) && $(GO) list -m -f '{{.Dir}}' $(CERTMANAGER_MODULE))/deploy/charts/cert-manager \
		hack/kind/certmanager-manifest.sh

.PHONY: test-e2e-sources
test-e2e-sources: kind-node-image $(KIND_CERTMANAGER_MANIFEST) ## The e2e suite on kind with everything built here from sources (no registry; docs/e2e.md): installs Docker, builds the node image, runs test-e2e.
	@grep -q 'imageTag: $(ETCD_IMAGE_TAG)$$' test/e2e/kind/cluster-sources.yaml || { echo "test/e2e/kind/cluster-sources.yaml: etcd's imageTag must be $(ETCD_IMAGE_TAG), the etcd built here"; exit 1; }
	@grep -q 'image: $(KUBEROUTER_IMAGE)$$' test/e2e/kind/kube-router.yaml || { echo "test/e2e/kind/kube-router.yaml: the image must be $(KUBEROUTER_IMAGE), the one built here"; exit 1; }
	@# The nodes pull nothing: the bundles' workloads run the node image's pause (e2e.RunEverywhere).
	PATH="$(ROOT)/hack/kind/bin:$(BIN):$$PATH" E2E_RUNNABLE_IMAGE=registry.k8s.io/pause:$(PAUSE_TAG) \
	$(MAKE) --no-print-directory test-e2e KIND=$(KIND_TOOLS)/kind \
		KIND_IMAGE=$(KIND_NODE_IMAGE) KIND_CONFIG=test/e2e/kind/cluster-sources.yaml CERTMANAGER_MANIFEST=$(KIND_CERTMANAGER_MANIFEST) \
		KIND_NETWORK_POLICY=test/e2e/kind/kube-router.yaml E2E_PROBE_IMAGE=$(KUBEROUTER_IMAGE)

.PHONY: test-e2e-local
test-e2e-local: control-plane testdata certmanager certmanager-crds ## The e2e suite on the local control plane: cert-manager, two manager processes behind a load balancer (part of `make test`).
	$(GO) test -count=1 -timeout 20m -v ./test/e2e/local/
