##@ Image

# `make image` builds without Docker (hack/tools/image) the image the Dockerfile builds with Docker:
# FROM scratch, the static binary at /manager, /etc/passwd, /etc/group, /home/nonroot and /tmp, run as
# 65532:65532, with OCI labels. IMG is its tag, IMAGE_ARCH its GOARCH.
IMG ?= cos-externalizer:dev
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
KIND_CLUSTER ?= cos-externalizer
IMAGE_DIR := $(BIN)/image
IMAGE_ARCHIVE := $(IMAGE_DIR)/cos-externalizer.tar
IMAGE_BUILDER := $(IMAGE_DIR)/image-builder
# $(call manager-build,GOARCH,OUTPUT): the static manager binary every image holds. CGO_ENABLED=0 and
# -trimpath are the flags of every build here (GOFLAGS, in the Makefile), so on linux/amd64 it reuses what tests and
# `make build` compiled; spelled out because the image's static binary and reproducible digests need
# them whatever GOFLAGS says.
manager-build = CGO_ENABLED=0 GOOS=linux GOARCH=$(1) $(GO) build -trimpath -buildvcs=false -ldflags "-s -w $(VERSION_LDFLAGS)" -o $(2) ./cmd/cos-externalizer
# The multi-arch image: an OCI image layout of one image per IMAGE_ARCHES, its SBOM beside it.
IMAGE_ARCHES ?= amd64 arm64
IMAGE_ARCHES_CSV = $(shell echo $(IMAGE_ARCHES) | tr ' ' ,)
IMAGE_LAYOUT ?= $(IMAGE_DIR)/oci
IMAGE_SBOM ?= $(IMAGE_DIR)/sbom.spdx.json
REGISTRY ?= ghcr.io/cos-externalizer/cos-externalizer

.PHONY: image-builder
image-builder:
	@mkdir -p $(IMAGE_DIR)
	cd hack/tools/image && $(GO) build -o $(IMAGE_BUILDER) .

# $(call image-archive,BINARY): the docker-archive of BINARY, built for IMAGE_ARCH, tagged IMG.
image-archive = SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(IMAGE_BUILDER) build -binary $(1) -tag $(IMG) -version $(VERSION) \
	-revision '$(REVISION)' -arch $(IMAGE_ARCH) -output $(IMAGE_ARCHIVE)

.PHONY: image
image: image-builder ## Build the manager image without Docker into bin/image/cos-externalizer.tar (docker-archive, tag $IMG).
	$(call manager-build,$(IMAGE_ARCH),$(IMAGE_DIR)/manager)
	$(call image-archive,$(IMAGE_DIR)/manager)
	@echo "load it into kind:   kind load image-archive $(IMAGE_ARCHIVE:$(ROOT)/%=%) --name $(KIND_CLUSTER)"
	@echo "or into Docker:      docker load -i $(IMAGE_ARCHIVE:$(ROOT)/%=%)"

.PHONY: image-layout
image-layout: image-builder ## Build the multi-arch image ($IMAGE_ARCHES) as an OCI image layout with its SPDX SBOM as a referrer into bin/image/oci/.
	@for arch in $(IMAGE_ARCHES); do echo "building the manager for linux/$$arch"; \
		$(call manager-build,$$arch,$(IMAGE_DIR)/manager-$$arch) || exit 1; done
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(IMAGE_BUILDER) layout $(foreach a,$(IMAGE_ARCHES),-binary $(a)=$(IMAGE_DIR)/manager-$(a)) \
		-version $(VERSION) -revision '$(REVISION)' -repository $(REGISTRY) \
		-output $(IMAGE_LAYOUT) -sbom $(IMAGE_SBOM) -digest-file $(IMAGE_DIR)/oci.digest

.PHONY: image-check
# The archive is made of the layout's binary for IMAGE_ARCH (one link of the manager less than make
# image then make image-layout), or of its own build when IMAGE_ARCHES lacks IMAGE_ARCH.
image-check: image-layout ## Check both images: entrypoint, numeric non-root user, static /manager per arch answering --version, labels, the layout's platforms and SBOM, same digest when rebuilt.
	$(if $(filter $(IMAGE_ARCH),$(IMAGE_ARCHES)),,$(call manager-build,$(IMAGE_ARCH),$(IMAGE_DIR)/manager-$(IMAGE_ARCH)))
	$(call image-archive,$(IMAGE_DIR)/manager-$(IMAGE_ARCH))
	cd hack/tools/image && $(GO) vet ./... && $(GO) test -count=1 -vet=off ./...
	$(IMAGE_BUILDER) check -archive $(IMAGE_ARCHIVE) -tag $(IMG) -version $(VERSION)
	$(IMAGE_BUILDER) check-layout -layout $(IMAGE_LAYOUT) -version $(VERSION) -revision '$(REVISION)' -sbom $(IMAGE_SBOM) \
		-arches $(IMAGE_ARCHES_CSV)
