##@ Local control plane

.PHONY: tools
tools: control-plane certmanager helm testdata $(GOLANGCI_LINT_STAMP) $(ACTIONLINT_STAMP) ## Build every pinned tool into bin/ and fetch the test bundles (CI caches bin/).

.PHONY: control-plane
control-plane: $(CONTROLPLANE_STAMP) ## Build etcd, kube-*, kubectl and kwok (and cert-manager's controller and cainjector, from the same module) into bin/ (first time ~15 min on 2 idle cores).

.PHONY: certmanager
certmanager: $(CONTROLPLANE_STAMP) $(CERTMANAGER_CRDS_STAMP) ## Build cert-manager's controller and cainjector (with the control plane, from the same module) into bin/ and fetch its CRDs.

.PHONY: cluster-up
cluster-up: control-plane ## Start the local control plane in the background; prints the KUBECONFIG to export.
	$(GO) run ./test/cmd/localcluster up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane started by cluster-up.
	$(GO) run ./test/cmd/localcluster down

##@ Run

# The loopback port the webhooks of `make run` listen on without KUBECONFIG; 0 picks a free one.
WEBHOOK_PORT ?= 0

.PHONY: run
run: control-plane build ## Run the manager: against $KUBECONFIG (webhooks off) if set, else on a fresh local control plane with its webhooks, as its ServiceAccount with config/rbac's RBAC (ARGS=... adds flags, WEBHOOK_PORT=N fixes the port).
	$(GO) build -o $(BIN)/localcluster ./test/cmd/localcluster
	$(BIN)/localcluster run --webhooks --webhook-port=$(WEBHOOK_PORT) -- $(BIN)/cos-externalizer $(ARGS)

.PHONY: clean
clean: ## Remove built binaries and local control-plane state.
	rm -rf $(BIN) $(LOCAL)
