##@ Release

# `make release VERSION=vX.Y.Z` writes what a release ships into dist/$VERSION/ (docs/release.md): an
# install manifest per overlay (install.yaml is config/default) with the image pinned by its index
# digest in $REGISTRY, the multi-arch image as an OCI image layout (image/) with its SPDX SBOM, the
# plugin archives and krew manifest (cos.yaml), the Helm chart (cos-externalizer-X.Y.Z.tgz: version
# and appVersion stamped, image.repository $REGISTRY, reproducible under SOURCE_DATE_EPOCH; helm push
# makes it an OCI artifact), and sha256sums.txt over all of it. Nothing is pushed. The builds are
# make's (each with the release's VERSION, REVISION and SOURCE_DATE_EPOCH, read once here); the rest
# is hack/release.sh, one step at a time.
RELEASE_OVERLAYS ?= default self-signed webhook-only production
RELEASE_DIR = $(ROOT)/dist/$(VERSION)
RELEASE_WORK = $(BIN)/release/$(VERSION)
RELEASE_PINS = VERSION=$(VERSION) REVISION=$(REVISION) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)
RELEASE_ENV = $(RELEASE_PINS) REGISTRY='$(REGISTRY)' RELEASE_DIR=$(RELEASE_DIR) RELEASE_WORK=$(RELEASE_WORK) \
	RELEASE_OVERLAYS='$(RELEASE_OVERLAYS)' KUBECTL='$(KUBECTL)' HELM=$(BIN)/helm IMAGE_ARCHES='$(IMAGE_ARCHES)'

.PHONY: release
release: ## Build the release into dist/$VERSION/ (VERSION=vX.Y.Z, REGISTRY=...): install manifests pinned by digest, multi-arch OCI image + SBOM, plugin archives, krew manifest, Helm chart, sha256sums.txt.
	@$(RELEASE_ENV) hack/release.sh check
	$(MAKE) --no-print-directory helm $(KUBECTL_DEP)
	rm -rf $(RELEASE_DIR) $(RELEASE_WORK) && mkdir -p $(RELEASE_DIR) $(RELEASE_WORK)
	$(MAKE) --no-print-directory image-layout $(RELEASE_PINS) IMAGE_DIR=$(RELEASE_WORK) IMAGE_LAYOUT=$(RELEASE_DIR)/image IMAGE_SBOM=$(RELEASE_DIR)/sbom.spdx.json
	@$(RELEASE_ENV) hack/release.sh manifests
	$(MAKE) --no-print-directory plugin-dist $(RELEASE_PINS) PLUGIN_DIST=$(RELEASE_WORK)/plugin
	mv $(RELEASE_WORK)/plugin/* $(RELEASE_DIR)/
	@$(RELEASE_ENV) hack/release.sh chart
	@$(RELEASE_ENV) hack/release.sh finish
