##@ Helm

# The chart charts/cos-externalizer is generated from the overlays of config/ by hack/gen/helmgen (kubectl
# kustomize of each mode's overlay, values substituted at known paths); never edit it by hand: make verify
# regenerates it. CHART_VERSION is the chart's version; its appVersion is the overlays' image tag.
CHART_VERSION ?= 0.1.0

.PHONY: chart
chart: $(CONTROLPLANE_STAMP) ## Regenerate the Helm chart charts/cos-externalizer from the overlays of config/.
	$(GO) run ./hack/gen/helmgen -kubectl $(BIN)/kubectl -config config -out charts/cos-externalizer -version $(CHART_VERSION) \
		-registry $(REGISTRY)

.PHONY: helm
helm: $(HELM_STAMP) ## Build helm into bin/ (pinned in hack/tools/helm; the chart test runs it).
