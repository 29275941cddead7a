# The pinned tools and data of bin/: their versions, read from hack/tools/*/go.mod so there is one place
# to change them, their stamps, and the rules that build or fetch them. Included by the Makefile before
# any rule that names a stamp; lists no target of `make help` (the targets that name these stamps do).
#
# Each stamp is named by the tool's version and a hash of the files that pin it, and has no
# prerequisites: it is rebuilt when those files change, never because a checkout's files are newer
# than bin/. (.github/workflows/ci.yml keys its cache of bin/ on the *_VERSION, *_MINOR and *_LDFLAGS
# variables below, as make evaluates them.)

# $(call required,MODULE,GO_MOD): the version GO_MOD requires of MODULE (a require line or a line of a
# require block; not a replacement).
required = $(shell awk -v m=$(1) '($$1=="require" && $$2==m) {print $$3; exit} ($$1==m && $$2 ~ /^v/) {print $$2; exit}' $(2))
# $(call pins,FILES): a hash of the content of the files that pin a tool, for its stamp's name.
pins = $(shell cat $(1) | sha256sum | cut -c1-12)
# $(call stamp,GLOB): the recipe's last line: replaces the stamps GLOB matches with the target.
stamp = rm -f $(filter-out $@,$(wildcard $(1))) && touch $@

# The local control plane and cert-manager: everything hack/tools/controlplane pins, in one go build
# (make control-plane, make certmanager): etcd (its own entry point, etcd/main.go), kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok, and cert-manager's controller and cainjector
# (small mains over its library, for tests that start cert-manager beside the local control plane:
# test/controlplane.StartCertManager). One module and one build, so the libraries they share (k8s.io/*,
# gRPC, protobuf, OpenTelemetry...) are compiled once (docs/benchmarks/2026-11-27-cold-make-test.md).
# Each binary keeps its own link flags (-ldflags=PATTERN=FLAGS applies to the main packages PATTERN
# matches); kwok-stages.yaml is the kwok stages the local control plane loads.
CONTROLPLANE_DIR := hack/tools/controlplane
KUBE_VERSION := $(call required,k8s.io/kubernetes,$(CONTROLPLANE_DIR)/go.mod)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
ETCD_VERSION := $(call required,go.etcd.io/etcd/server/v3,$(CONTROLPLANE_DIR)/go.mod)
KWOK_VERSION := $(call required,sigs.k8s.io/kwok,$(CONTROLPLANE_DIR)/go.mod)
CERTMANAGER_MODULE := github.com/cert-manager/cert-manager
CERTMANAGER_VERSION := $(call required,$(CERTMANAGER_MODULE),$(CONTROLPLANE_DIR)/go.mod)
CONTROLPLANE_PINS := $(addprefix $(CONTROLPLANE_DIR)/,go.mod go.sum etcd/main.go cert-manager-controller/main.go cert-manager-cainjector/main.go)
CONTROLPLANE_STAMP := $(BIN)/.stamp-controlplane-kube-$(KUBE_VERSION)-etcd-$(ETCD_VERSION)-kwok-$(KWOK_VERSION)-cert-manager-$(CERTMANAGER_VERSION)-$(call pins,$(CONTROLPLANE_PINS))
KUBE_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=1 \
	-X k8s.io/client-go/pkg/version.gitMinor=$(KUBE_MINOR)
CERTMANAGER_LDFLAGS := -s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$(CERTMANAGER_VERSION)
CONTROLPLANE_PKGS := ./etcd $(addprefix k8s.io/kubernetes/cmd/,kube-apiserver kube-controller-manager kube-scheduler kubectl) \
	sigs.k8s.io/kwok/cmd/kwok ./cert-manager-controller ./cert-manager-cainjector

$(CONTROLPLANE_STAMP):
	@mkdir -p $(BIN)
	@echo "building etcd $(ETCD_VERSION), kube-apiserver, kube-controller-manager, kube-scheduler and kubectl $(KUBE_VERSION), kwok $(KWOK_VERSION), cert-manager controller and cainjector $(CERTMANAGER_VERSION) (first time: ~15 min)"; set -x; \
	cd $(CONTROLPLANE_DIR) && $(GO) build -ldflags "-s -w" -ldflags "k8s.io/kubernetes/cmd/...=$(KUBE_LDFLAGS)" \
		-ldflags "./cert-manager-...=$(CERTMANAGER_LDFLAGS)" -o $(BIN)/ $(CONTROLPLANE_PKGS) && \
	stages=$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage && \
		for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
			pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do \
			echo "---"; cat "$$stages/$$f"; done > $(BIN)/kwok-stages.yaml
	@$(call stamp,$(BIN)/.stamp-controlplane-*)

# The linters (make lint).
GOLANGCI_LINT_MODULE := github.com/golangci/golangci-lint/v2
GOLANGCI_LINT_VERSION := $(call required,$(GOLANGCI_LINT_MODULE),hack/tools/golangci-lint/go.mod)
GOLANGCI_LINT_STAMP := $(BIN)/.stamp-golangci-lint-$(GOLANGCI_LINT_VERSION)-$(call pins,hack/tools/golangci-lint/go.mod hack/tools/golangci-lint/go.sum)
ACTIONLINT_MODULE := github.com/rhysd/actionlint
ACTIONLINT_VERSION := $(call required,$(ACTIONLINT_MODULE),hack/tools/actionlint/go.mod)
ACTIONLINT_STAMP := $(BIN)/.stamp-actionlint-$(ACTIONLINT_VERSION)-$(call pins,hack/tools/actionlint/go.mod hack/tools/actionlint/go.sum)

$(GOLANGCI_LINT_STAMP):
	@mkdir -p $(BIN)
	@echo "building golangci-lint $(GOLANGCI_LINT_VERSION) (first time: ~4 min)"; set -x; \
	cd hack/tools/golangci-lint && $(GO) build \
		-ldflags "-s -w -X main.version=$(patsubst v%,%,$(GOLANGCI_LINT_VERSION)) -X main.goVersion=$$($(GO) env GOVERSION)" \
		-o $(BIN)/golangci-lint $(GOLANGCI_LINT_MODULE)/cmd/golangci-lint
	@$(call stamp,$(BIN)/.stamp-golangci-lint-*)

$(ACTIONLINT_STAMP):
	@mkdir -p $(BIN)
	@echo "building actionlint $(ACTIONLINT_VERSION)"; set -x; \
	cd hack/tools/actionlint && $(GO) build -ldflags "-s -w -X $(ACTIONLINT_MODULE).version=$(ACTIONLINT_VERSION)" \
		-o $(BIN)/actionlint $(ACTIONLINT_MODULE)/cmd/actionlint
	@$(call stamp,$(BIN)/.stamp-actionlint-*)

# helm (make helm; the chart test and make release run it), with the Kubernetes version of its
# client-go as the one `helm template` and `helm lint` assume.
HELM_VERSION := $(call required,helm.sh/helm/v3,hack/tools/helm/go.mod)
HELM_K8S_MINOR := $(word 2,$(subst ., ,$(shell awk '$$1=="k8s.io/client-go" {print $$2}' hack/tools/helm/go.mod)))
HELM_STAMP := $(BIN)/.stamp-helm-$(HELM_VERSION)-$(call pins,hack/tools/helm/go.mod hack/tools/helm/go.sum)

$(HELM_STAMP):
	@mkdir -p $(BIN)
	@echo "building helm $(HELM_VERSION) (first time: ~1 min after the control plane's build)"; set -x; \
	cd hack/tools/helm && $(GO) build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR) \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR)" \
		-o $(BIN)/helm helm.sh/helm/v3/cmd/helm
	@$(call stamp,$(BIN)/.stamp-helm-*)

# The data the tests read, copied out of Go module zips pinned in a tool module and checked against its
# go.sum (hack/tools/module-files.sh): the real third-party bundles (make testdata;
# test/builders.BundleDir, COS_TESTDATA_DIR overrides) and cert-manager's CRDs, which the deploy tests
# install to dry-run config/default and test/controlplane.StartCertManager installs before starting
# cert-manager (make certmanager-crds; COS_CERTMANAGER_CRDS_DIR). Each stamp lives inside its folder,
# so deleting the folder also makes it fetched again.
PROMOP_MODULE := github.com/prometheus-operator/prometheus-operator
PROMOP_VERSION := $(call required,$(PROMOP_MODULE),hack/tools/testdata/go.mod)
ARGOCD_MODULE := github.com/argoproj/argo-cd/v3
ARGOCD_VERSION := $(call required,$(ARGOCD_MODULE),hack/tools/testdata/go.mod)
TESTDATA := $(BIN)/testdata/bundles
TESTDATA_STAMP := $(TESTDATA)/.stamp-prometheus-operator-$(PROMOP_VERSION)-argocd-$(ARGOCD_VERSION)-$(call pins,hack/tools/testdata/go.mod hack/tools/testdata/go.sum)
CERTMANAGER_CRDS := $(BIN)/testdata/certmanager-crds
CERTMANAGER_CRDS_STAMP := $(CERTMANAGER_CRDS)/.stamp-cert-manager-$(CERTMANAGER_VERSION)-$(call pins,$(CONTROLPLANE_DIR)/go.mod $(CONTROLPLANE_DIR)/go.sum)

$(TESTDATA_STAMP):
	@echo "fetching test bundles: $(PROMOP_MODULE) $(PROMOP_VERSION), $(ARGOCD_MODULE) $(ARGOCD_VERSION)"
	@GO=$(GO) hack/tools/module-files.sh hack/tools/testdata $@ \
		$(PROMOP_MODULE) 'example/prometheus-operator-crd-full/*.yaml' prometheus-operator-crds \
		$(ARGOCD_MODULE) manifests/install.yaml argocd-install

$(CERTMANAGER_CRDS_STAMP):
	@echo "fetching cert-manager's CRDs: $(CERTMANAGER_MODULE) $(CERTMANAGER_VERSION)"
	@GO=$(GO) hack/tools/module-files.sh $(CONTROLPLANE_DIR) $@ $(CERTMANAGER_MODULE) 'deploy/crds/*.yaml' .

# Flux's source-controller and kustomize-controller (make flux-controllers, make test-gitops), built
# with the Go of the rest into bin/flux/.
FLUX_BIN := $(BIN)/flux
FLUX_KUSTOMIZE_VERSION := $(shell awk '$$1=="github.com/fluxcd/kustomize-controller" {print $$2; exit}' hack/tools/fluxcontrollers/go.mod)
FLUX_SOURCE_VERSION := $(shell awk '$$1=="github.com/fluxcd/source-controller" {print $$2; exit}' hack/tools/fluxcontrollers/go.mod)
FLUX_STAMP := $(FLUX_BIN)/.stamp-flux-source-$(FLUX_SOURCE_VERSION)-kustomize-$(FLUX_KUSTOMIZE_VERSION)-$(call pins,hack/tools/fluxcontrollers/go.mod hack/tools/fluxcontrollers/go.sum)

$(FLUX_STAMP):
	@mkdir -p $(FLUX_BIN)
	cd hack/tools/fluxcontrollers && $(GO) build -ldflags "-s -w" -o $(FLUX_BIN)/ \
		github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller
	@$(call stamp,$(FLUX_BIN)/.stamp-flux-*)

# What make test-e2e-sources builds: kubelet, kubeadm and kube-proxy (from hack/tools/controlplane, the
# release of the local control plane), kind and CoreDNS (at the version the pinned kubeadm asks for),
# into bin/kind-tools/.
KIND_TOOLS := $(BIN)/kind-tools
KIND_VERSION := $(call required,sigs.k8s.io/kind,hack/tools/kind/go.mod)
COREDNS_VERSION := $(call required,github.com/coredns/coredns,hack/tools/coredns/go.mod)
KIND_TOOLS_STAMP := $(KIND_TOOLS)/.stamp-$(KUBE_VERSION)-kind-$(KIND_VERSION)-coredns-$(COREDNS_VERSION)-$(call pins,$(foreach d,controlplane kind coredns,hack/tools/$(d)/go.mod hack/tools/$(d)/go.sum))

$(KIND_TOOLS_STAMP):
	@mkdir -p $(KIND_TOOLS)
	@echo "building kubelet, kubeadm, kube-proxy $(KUBE_VERSION), kind $(KIND_VERSION) and CoreDNS $(COREDNS_VERSION) (first time: ~10 min)"; set -x; \
	(cd $(CONTROLPLANE_DIR) && $(GO) build -ldflags "$(KUBE_LDFLAGS)" -o $(KIND_TOOLS)/ \
		k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-proxy) && \
	(cd hack/tools/kind && $(GO) build -ldflags "-s -w" -o $(KIND_TOOLS)/kind sigs.k8s.io/kind) && \
	(cd hack/tools/coredns && $(GO) build -ldflags "-s -w" -o $(KIND_TOOLS)/coredns github.com/coredns/coredns)
	@$(call stamp,$(KIND_TOOLS)/.stamp-*)

# kube-router (hack/tools/kuberouter), whose network policy controller enforces NetworkPolicies in the
# cluster of test-e2e-sources: kindnetd's own (kube-network-policies) needs the kernel's nftables queue
# (CONFIG_NFT_QUEUE), which these machines lack (docs/e2e.md). Built static, as its release is.
KUBEROUTER_VERSION := $(call required,github.com/cloudnativelabs/kube-router/v2,hack/tools/kuberouter/go.mod)
KUBEROUTER_DIR := $(BIN)/kube-router
KUBEROUTER_STAMP := $(KUBEROUTER_DIR)/.stamp-kube-router-$(KUBEROUTER_VERSION)-$(call pins,hack/tools/kuberouter/go.mod hack/tools/kuberouter/go.sum)
KUBEROUTER_IMAGE := cos-e2e.local/kube-router:$(KUBEROUTER_VERSION)

$(KUBEROUTER_STAMP):
	@mkdir -p $(KUBEROUTER_DIR)
	cd hack/tools/kuberouter && CGO_ENABLED=0 $(GO) build -ldflags "-s -w" -o $(KUBEROUTER_DIR)/kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
	@$(call stamp,$(KUBEROUTER_DIR)/.stamp-*)
