##@ Plugin

# kubectl cos (cmd/kubectl-cos), stamped with VERSION. kubectl runs kubectl-cos for `kubectl cos` and
# kubectl_complete-cos to complete its arguments, when both are on PATH.
PLUGIN_LDFLAGS = -X github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands.Version=$(VERSION)
PLUGIN_DIST := $(BIN)/plugin-dist
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: plugin
plugin: ## Build the kubectl cos plugin into bin/: kubectl-cos and kubectl_complete-cos (put bin/ on PATH).
	$(GO) build -ldflags "$(PLUGIN_LDFLAGS)" -o $(BIN)/kubectl-cos ./cmd/kubectl-cos
	$(GO) build -ldflags "$(PLUGIN_LDFLAGS)" -o $(BIN)/kubectl_complete-cos ./cmd/kubectl_complete-cos

# The archives are reproducible: the same commit gives the same archives (hack/plugin-dist.sh).
.PHONY: plugin-dist
plugin-dist: ## Build the plugin's release archives for $PLUGIN_PLATFORMS (binaries and LICENSE) and its krew manifest (hack/krew/cos.yaml filled in) into bin/plugin-dist/.
	@GO=$(GO) VERSION=$(VERSION) LDFLAGS='$(PLUGIN_LDFLAGS)' SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
		PLATFORMS='$(PLUGIN_PLATFORMS)' OUT=$(PLUGIN_DIST) hack/plugin-dist.sh
