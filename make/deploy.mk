##@ Deploy

# The kustomize overlay of config/ that deploy and undeploy use: default (with cert-manager),
# self-signed (without) or webhook-only (OLM rolls out; no CRD, no namespace, no wildcard RBAC).
OVERLAY ?= default
# The manager image deploy sets (name[:tag] or name@digest).
IMG ?= cos-externalizer:dev
# Extra manager flags and a replica count for deploy (empty: the overlay's), e.g. for tests.
DEPLOY_ARGS ?=
DEPLOY_REPLICAS ?=
# kustomize components added over the overlay, as paths below config/ (e.g. components/webhook-client-ca).
DEPLOY_COMPONENTS ?=
# kubectl with kustomize; the one of bin/ unless given.
KUBECTL ?= $(BIN)/kubectl
KUBECTL_DEP := $(if $(filter $(BIN)/kubectl,$(KUBECTL)),$(CONTROLPLANE_STAMP))

.PHONY: deploy
deploy: $(KUBECTL_DEP) ## Install config/$OVERLAY (default, production, self-signed, webhook-only) with image $IMG into the cluster of $KUBECONFIG; $IMG must be pinned by digest, built by make image, or IMG_VERIFIED=1. DEPLOY_REPLICAS=N, DEPLOY_ARGS='--flag=v ...' and DEPLOY_COMPONENTS='components/...' adjust the manager.
	@OVERLAY='$(OVERLAY)' IMG='$(IMG)' IMG_VERIFIED='$(IMG_VERIFIED)' IMAGE_ARCHIVE='$(IMAGE_ARCHIVE)' KIND_CLUSTER='$(KIND_CLUSTER)' \
		REGISTRY='$(REGISTRY)' KUBECTL='$(KUBECTL)' DEPLOY_ARGS='$(DEPLOY_ARGS)' DEPLOY_REPLICAS='$(DEPLOY_REPLICAS)' \
		DEPLOY_COMPONENTS='$(DEPLOY_COMPONENTS)' hack/deploy.sh

.PHONY: undeploy
undeploy: $(KUBECTL_DEP) ## Uninstall config/$OVERLAY and KEEP every workload (hack/uninstall.sh): webhooks and manager go, our finalizers are released; ClusterObjectSets, their objects and Secrets, the CRD and the namespace stay. DRY_RUN=1 shows it.
	@test -f config/$(OVERLAY)/kustomization.yaml || { echo "no overlay config/$(OVERLAY)"; exit 1; }
	KUBECTL='$(KUBECTL)' GO='$(GO)' hack/uninstall.sh $(if $(DRY_RUN),--dry-run) -k config/$(OVERLAY)

.PHONY: undeploy-all
undeploy-all: $(KUBECTL_DEP) ## DESTROYS WORKLOADS, needs CONFIRM=yes: deletes every ClusterObjectSet, so the manager tears down EVERYTHING they installed (CRDs and custom resources too), then config/$OVERLAY with the CRD and the namespace.
	@test -f config/$(OVERLAY)/kustomization.yaml || { echo "no overlay config/$(OVERLAY)"; exit 1; }
	@test '$(CONFIRM)' = yes || { echo "undeploy-all deletes every ClusterObjectSet and EVERYTHING THEY INSTALLED (CRDs and custom resources"; \
		echo "included), then the CRD and the namespace with the object-data Secrets. To keep the workloads: make undeploy."; \
		echo "To go on: make undeploy-all CONFIRM=yes"; exit 1; }
	KUBECTL='$(KUBECTL)' GO='$(GO)' hack/uninstall.sh --delete-workloads --yes -k config/$(OVERLAY)
