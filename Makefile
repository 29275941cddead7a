# cos-externalizer. `make help` lists the targets.
#
# The local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), kubectl
# and cert-manager's controller and cainjector are built from the Go module proxy into bin/ at the
# versions pinned in hack/tools/*/go.mod: all of these from the one module hack/tools/controlplane, in
# one go build, so that the libraries they share are compiled once.
# Each tool's stamp in bin/ is named by its version and a hash of the files that pin it, so it is rebuilt
# when those change, never because a checkout's files are newer than bin/.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BIN := $(ROOT)/bin
LOCAL := $(ROOT)/.local
GO ?= go
CONTROLLER_GEN := $(GO) tool controller-gen

# One set of Go build flags for every build here (tests, build, run, the tools of hack/tools, images,
# releases): the build cache keys compiled packages by their flags, so a build that differs compiles
# the standard library and every shared module again. -trimpath is what reproducible images and
# archives need, CGO_ENABLED=0 what the image's static binary needs; nothing here needs cgo. Exported:
# the go builds that tests run share them too. (`go test` outside make: the same env shares the cache.)
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(shell $(GO) env GOFLAGS)) -trimpath)

# Versions, read from the pinned build recipes so there is one place to change them.
# $(call required,MODULE,GO_MOD): the version GO_MOD requires of MODULE (a require line or a line of a
# require block; not a replacement).
required = $(shell awk -v m=$(1) '($$1=="require" && $$2==m) {print $$3; exit} ($$1==m && $$2 ~ /^v/) {print $$2; exit}' $(2))
CONTROLPLANE_DIR := hack/tools/controlplane
KUBE_VERSION := $(call required,k8s.io/kubernetes,$(CONTROLPLANE_DIR)/go.mod)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
ETCD_VERSION := $(call required,go.etcd.io/etcd/server/v3,$(CONTROLPLANE_DIR)/go.mod)
KWOK_VERSION := $(call required,sigs.k8s.io/kwok,$(CONTROLPLANE_DIR)/go.mod)
PROMOP_MODULE := github.com/prometheus-operator/prometheus-operator
PROMOP_VERSION := $(shell awk '$$1=="require" && $$2=="$(PROMOP_MODULE)" {print $$3}' hack/tools/testdata/go.mod)
ARGOCD_MODULE := github.com/argoproj/argo-cd/v3
ARGOCD_VERSION := $(shell awk '$$1=="require" && $$2=="$(ARGOCD_MODULE)" {print $$3}' hack/tools/testdata/go.mod)
GOLANGCI_LINT_MODULE := github.com/golangci/golangci-lint/v2
GOLANGCI_LINT_VERSION := $(shell awk '$$1=="require" && $$2=="$(GOLANGCI_LINT_MODULE)" {print $$3}' hack/tools/golangci-lint/go.mod)
ACTIONLINT_MODULE := github.com/rhysd/actionlint
ACTIONLINT_VERSION := $(shell awk '$$1=="require" && $$2=="$(ACTIONLINT_MODULE)" {print $$3}' hack/tools/actionlint/go.mod)
CERTMANAGER_MODULE := github.com/cert-manager/cert-manager
CERTMANAGER_VERSION := $(call required,$(CERTMANAGER_MODULE),$(CONTROLPLANE_DIR)/go.mod)

HELM_VERSION := $(shell awk '$$1=="require" && $$2=="helm.sh/helm/v3" {print $$3}' hack/tools/helm/go.mod)

# $(call pins,FILES): a hash of the content of the files that pin a tool, for its stamp's name. A stamp
# has no prerequisites: its name says what it was built from, so a file's time never rebuilds it.
pins = $(shell cat $(1) | sha256sum | cut -c1-12)
# $(call adopt,OLD_STAMP,BINARY=GO_MOD ...): a bin/ stamped by version only (before stamps carried the
# hash) is taken over once without a rebuild when OLD_STAMP is there and each binary's Go build info
# names the module versions its go.mod pins; it keeps OLD_STAMP (hack/adopt-stamp.sh).
adopt = GO=$(GO) hack/adopt-stamp.sh $@ $(1) $(2)
# $(call stamp,GLOB,OLD_STAMP): the recipe's last line: replaces the stamps GLOB matches, but OLD_STAMP,
# with the target.
stamp = rm -f $(filter-out $@ $(2),$(wildcard $(1))) && touch $@

# One stamp for everything hack/tools/controlplane builds into bin/ (make control-plane, make certmanager).
CONTROLPLANE_PINS := $(addprefix $(CONTROLPLANE_DIR)/,go.mod go.sum etcd/main.go cert-manager-controller/main.go cert-manager-cainjector/main.go)
CONTROLPLANE_STAMP := $(BIN)/.stamp-controlplane-kube-$(KUBE_VERSION)-etcd-$(ETCD_VERSION)-kwok-$(KWOK_VERSION)-cert-manager-$(CERTMANAGER_VERSION)-$(call pins,$(CONTROLPLANE_PINS))
GOLANGCI_LINT_STAMP := $(BIN)/.stamp-golangci-lint-$(GOLANGCI_LINT_VERSION)-$(call pins,hack/tools/golangci-lint/go.mod hack/tools/golangci-lint/go.sum)
ACTIONLINT_STAMP := $(BIN)/.stamp-actionlint-$(ACTIONLINT_VERSION)-$(call pins,hack/tools/actionlint/go.mod hack/tools/actionlint/go.sum)
HELM_STAMP := $(BIN)/.stamp-helm-$(HELM_VERSION)-$(call pins,hack/tools/helm/go.mod hack/tools/helm/go.sum)
# The real third-party bundles the tests read (test/builders.BundleDir; COS_TESTDATA_DIR overrides).
# Their stamp lives inside the folder, so deleting the folder also makes it fetched again.
TESTDATA := $(BIN)/testdata/bundles
TESTDATA_STAMP := $(TESTDATA)/.stamp-prometheus-operator-$(PROMOP_VERSION)-argocd-$(ARGOCD_VERSION)-$(call pins,hack/tools/testdata/go.mod hack/tools/testdata/go.sum)
# cert-manager's CRDs, which the deploy tests install to dry-run config/default and
# test/controlplane.StartCertManager installs before starting cert-manager (COS_CERTMANAGER_CRDS_DIR).
CERTMANAGER_CRDS := $(BIN)/testdata/certmanager-crds
CERTMANAGER_CRDS_STAMP := $(CERTMANAGER_CRDS)/.stamp-cert-manager-$(CERTMANAGER_VERSION)-$(call pins,$(CONTROLPLANE_DIR)/go.mod $(CONTROLPLANE_DIR)/go.sum)

KUBE_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=1 \
	-X k8s.io/client-go/pkg/version.gitMinor=$(KUBE_MINOR)

# The manager's version, stamped into its binary (app.Version) and its image's label; `git describe`
# runs once, on first use (VERSION=... overrides it).
VERSION ?= $(eval VERSION := $$(or $$(shell git describe --tags --always --dirty 2>/dev/null),dev))$(VERSION)
VERSION_LDFLAGS = -X github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app.Version=$(VERSION)

# Tests find the control-plane binaries here (unless KUBEBUILDER_ASSETS names another folder).
export COS_BIN_DIR := $(BIN)
export COS_CERTMANAGER_CRDS_DIR := $(CERTMANAGER_CRDS)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate the CRD, webhook configurations and RBAC under config/ (kustomize builds on them).
	$(CONTROLLER_GEN) crd webhook rbac:roleName=cos-externalizer-manager paths="./api/...;./webhook/...;./controllers;./certs/servingcert;./cmd/..." \
		output:crd:artifacts:config=config/crd/bases output:webhook:artifacts:config=config/webhook \
		output:rbac:artifacts:config=config/rbac
	$(GO) run ./hack/gen/matchconditionsgen -conditions config/webhook/matchconditions.yaml -manifests config/webhook/manifests.yaml
	@# The rule only a manager that rolls out needs (anything on anything): a ClusterRole of its own,
	@# bound by the overlays that roll out, never by config/webhook-only.
	$(CONTROLLER_GEN) rbac:roleName=cos-externalizer-rollout paths=./controllers/rolloutrbac \
		output:rbac:artifacts:config=config/rbac/rollout

.PHONY: dashboard
dashboard: ## Generate the Grafana dashboard config/grafana/cos-externalizer.json from its spec (hack/gen/dashboardgen).
	$(GO) run ./hack/gen/dashboardgen -o config/grafana/cos-externalizer.json

.PHONY: reference
reference: ## Generate the command reference of kubectl cos and the manager's flag reference under docs/reference/.
	$(GO) run ./hack/gen/cmdref -o docs/reference/kubectl-cos.md
	$(GO) run ./hack/gen/flagref -o docs/reference/manager-flags.md

# Files that generators and `go mod tidy` own. verify fails when regenerating changes any of them,
# whatever else is uncommitted in the tree.
GENERATED := api/v1/zz_generated.deepcopy.go config/crd/bases config/webhook/manifests.yaml config/rbac/role.yaml \
	config/rbac/rollout/role.yaml go.mod go.sum charts/cos-externalizer config/grafana/cos-externalizer.json \
	docs/reference/kubectl-cos.md docs/reference/manager-flags.md

.PHONY: verify
verify: ## Regenerate code, manifests and go.sum; fail if that changed anything.
	@sum() { find $(GENERATED) -type f | sort | xargs sha256sum; }; before=$$(sum); \
	$(MAKE) --no-print-directory generate manifests dashboard reference chart >/dev/null && $(GO) mod tidy; after=$$(sum); \
	if [ "$$before" != "$$after" ]; then \
		echo "verify: generated files were out of date and have been regenerated; review and commit:"; \
		diff <(echo "$$before") <(echo "$$after") | awk '/^>/ {print "  " $$3}'; exit 1; fi

.PHONY: fmt
fmt: ## Format the Go code.
	$(GO) fmt ./...

.PHONY: lint
lint: golangci-lint actionlint ## gofmt check, go vet, golangci-lint and actionlint (make test runs it).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt'ed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT_STAMP) ## Run golangci-lint (pinned in hack/tools/golangci-lint, configured in .golangci.yml).
	$(BIN)/golangci-lint run ./...
	cd hack/tools/image && $(BIN)/golangci-lint run --config $(ROOT)/.golangci.yml ./...

GOLANGCI_LINT_OLD_STAMP := $(BIN)/.stamp-golangci-lint-$(GOLANGCI_LINT_VERSION)
$(GOLANGCI_LINT_STAMP):
	@mkdir -p $(BIN)
	@$(call adopt,$(GOLANGCI_LINT_OLD_STAMP),$(BIN)/golangci-lint=hack/tools/golangci-lint/go.mod) || { \
	echo "building golangci-lint $(GOLANGCI_LINT_VERSION) (first time: ~4 min)"; set -x; \
	cd hack/tools/golangci-lint && $(GO) build \
		-ldflags "-s -w -X main.version=$(patsubst v%,%,$(GOLANGCI_LINT_VERSION)) -X main.goVersion=$$($(GO) env GOVERSION)" \
		-o $(BIN)/golangci-lint $(GOLANGCI_LINT_MODULE)/cmd/golangci-lint; }
	@$(call stamp,$(BIN)/.stamp-golangci-lint-*,$(GOLANGCI_LINT_OLD_STAMP))

.PHONY: actionlint
actionlint: $(ACTIONLINT_STAMP) ## Lint .github/workflows (actionlint, pinned in hack/tools/actionlint; with shellcheck on PATH it checks run: scripts too), actions pinned by commit SHA.
	$(BIN)/actionlint
	@! grep -nE '^[ -]*uses: ' .github/workflows/*.yml | grep -vE 'uses: (\./[^ ]*|[^ @]+@[0-9a-f]{40})( |$$)' || { echo "pin these actions by full commit SHA (docs/ci.md)"; exit 1; }

ACTIONLINT_OLD_STAMP := $(BIN)/.stamp-actionlint-$(ACTIONLINT_VERSION)
$(ACTIONLINT_STAMP):
	@mkdir -p $(BIN)
	@$(call adopt,$(ACTIONLINT_OLD_STAMP),$(BIN)/actionlint=hack/tools/actionlint/go.mod) || { \
	echo "building actionlint $(ACTIONLINT_VERSION)"; set -x; \
	cd hack/tools/actionlint && $(GO) build -ldflags "-s -w -X $(ACTIONLINT_MODULE).version=$(ACTIONLINT_VERSION)" \
		-o $(BIN)/actionlint $(ACTIONLINT_MODULE)/cmd/actionlint; }
	@$(call stamp,$(BIN)/.stamp-actionlint-*,$(ACTIONLINT_OLD_STAMP))

.PHONY: build
build: ## Build the manager binary into bin/.
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/cos-externalizer ./cmd/cos-externalizer

##@ Plugin

# kubectl cos (cmd/kubectl-cos), stamped with VERSION. kubectl runs kubectl-cos for `kubectl cos` and
# kubectl_complete-cos to complete its arguments, when both are on PATH.
PLUGIN_LDFLAGS = -X github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/cos.Version=$(VERSION)
PLUGIN_DIST := $(BIN)/plugin-dist
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

# The one timestamp of the release's archives and image: the commit's time, so one commit gives one
# set of digests (https://reproducible-builds.org/specs/source-date-epoch/). Read once, on first use.
SOURCE_DATE_EPOCH ?= $(eval SOURCE_DATE_EPOCH := $$(or $$(shell git log -1 --format=%ct 2>/dev/null),0))$(SOURCE_DATE_EPOCH)

.PHONY: plugin
plugin: ## Build the kubectl cos plugin into bin/: kubectl-cos and kubectl_complete-cos (put bin/ on PATH).
	$(GO) build -ldflags "$(PLUGIN_LDFLAGS)" -o $(BIN)/kubectl-cos ./cmd/kubectl-cos
	$(GO) build -ldflags "$(PLUGIN_LDFLAGS)" -o $(BIN)/kubectl_complete-cos ./cmd/kubectl_complete-cos

# Each archive holds the two binaries and LICENSE; tar and gzip record no owner, time or order of
# the machine (SOURCE_DATE_EPOCH), so the same commit gives the same archives. -trimpath (also in GOFLAGS)
# keeps the checkout's path out of the binaries.
.PHONY: plugin-dist
plugin-dist: ## Build the plugin's release archives for $PLUGIN_PLATFORMS (binaries and LICENSE) and its krew manifest (hack/krew/cos.yaml filled in) into bin/plugin-dist/.
	@rm -rf $(PLUGIN_DIST) && mkdir -p $(PLUGIN_DIST)
	@cp hack/krew/cos.yaml $(PLUGIN_DIST)/cos.yaml
	@sed -i -e '/^#/d' -e 's/{{VERSION}}/$(VERSION)/g' $(PLUGIN_DIST)/cos.yaml
	@for p in $(PLUGIN_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; dir=$(PLUGIN_DIST)/kubectl-cos_$${os}_$${arch}; \
		echo "building kubectl-cos for $$os/$$arch"; mkdir -p $$dir; \
		for cmd in kubectl-cos kubectl_complete-cos; do \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags "-s -w $(PLUGIN_LDFLAGS)" -o $$dir/$$cmd ./cmd/$$cmd || exit 1; done; \
		cp LICENSE $$dir/LICENSE; \
		tar -C $$dir --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(SOURCE_DATE_EPOCH) -cf - . | gzip -n > $$dir.tar.gz && rm -rf $$dir; \
		sum=$$(sha256sum $$dir.tar.gz | cut -d' ' -f1); \
		sed -i "s/{{SHA256_$${os}_$${arch}}}/$$sum/" $(PLUGIN_DIST)/cos.yaml; done
	@! grep -n '^[^#]*{{' $(PLUGIN_DIST)/cos.yaml || { echo "hack/krew/cos.yaml names a platform PLUGIN_PLATFORMS lacks"; exit 1; }
	@echo "archives and the krew manifest: $(PLUGIN_DIST:$(ROOT)/%=%)"

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
# The commit, read once (other commits may land while make runs).
REVISION ?= $(eval REVISION := $$(shell git rev-parse HEAD 2>/dev/null))$(REVISION)
# $(call manager-build,GOARCH,OUTPUT): the static manager binary every image holds. CGO_ENABLED=0 and
# -trimpath are the flags of every build here (GOFLAGS above), so on linux/amd64 it reuses what tests and
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

##@ Release

# `make release VERSION=vX.Y.Z` writes what a release ships into dist/$VERSION/ (docs/release.md): an
# install manifest per overlay (install.yaml is config/default) with the image pinned by its index
# digest in $REGISTRY, the multi-arch image as an OCI image layout (image/) with its SPDX SBOM, the
# plugin archives and krew manifest (cos.yaml), the Helm chart (cos-externalizer-X.Y.Z.tgz: version
# and appVersion stamped, image.repository $REGISTRY, reproducible under SOURCE_DATE_EPOCH; helm push
# makes it an OCI artifact),
# and sha256sums.txt over all of it. Nothing is pushed.
RELEASE_OVERLAYS ?= default self-signed webhook-only production
RELEASE_DIR = $(ROOT)/dist/$(VERSION)
RELEASE_WORK = $(BIN)/release/$(VERSION)

.PHONY: release
release: ## Build the release into dist/$VERSION/ (VERSION=vX.Y.Z, REGISTRY=...): install manifests pinned by digest, multi-arch OCI image + SBOM, plugin archives, krew manifest, Helm chart, sha256sums.txt.
	@[[ '$(VERSION)' =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "release needs VERSION=vX.Y.Z, not '$(VERSION)'"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=no)" || \
		echo "release: warning: uncommitted changes; this release is not what $(REVISION) builds"
	$(if $(KUBECTL_DEP),$(MAKE) --no-print-directory $(KUBECTL_DEP))
	rm -rf $(RELEASE_DIR) $(RELEASE_WORK) && mkdir -p $(RELEASE_DIR) $(RELEASE_WORK)
	$(MAKE) --no-print-directory image-layout VERSION=$(VERSION) REVISION=$(REVISION) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
		IMAGE_DIR=$(RELEASE_WORK) IMAGE_LAYOUT=$(RELEASE_DIR)/image IMAGE_SBOM=$(RELEASE_DIR)/sbom.spdx.json
	@digest=$$(cat $(RELEASE_WORK)/oci.digest) && mkdir -p $(LOCAL) && tmp=$$(mktemp -d $(LOCAL)/release.XXXXXX) && \
	trap 'rm -rf "$$tmp"' EXIT && for o in $(RELEASE_OVERLAYS); do \
		f=install-$$o.yaml; [ $$o = default ] && f=install.yaml; \
		printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../config/%s\nimages:\n- name: cos-externalizer\n  newName: %s\n  digest: %s\n' \
			"$$o" '$(REGISTRY)' "$$digest" > "$$tmp/kustomization.yaml"; \
		{ echo "# cos-externalizer $(VERSION), config/$$o: kubectl apply --server-side -f $$f"; \
		  $(KUBECTL) kustomize "$$tmp"; } > $(RELEASE_DIR)/$$f; \
		grep -q "image: $(REGISTRY)@$$digest" $(RELEASE_DIR)/$$f || { echo "$$f: no image pinned to $(REGISTRY)@$$digest"; exit 1; }; \
		! grep -n 'image: cos-externalizer' $(RELEASE_DIR)/$$f || { echo "$$f: an image left unpinned"; exit 1; }; \
		echo "wrote $$f: config/$$o, image $(REGISTRY)@$$digest"; done
	$(MAKE) --no-print-directory plugin-dist VERSION=$(VERSION) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) PLUGIN_DIST=$(RELEASE_WORK)/plugin
	mv $(RELEASE_WORK)/plugin/* $(RELEASE_DIR)/
	$(MAKE) --no-print-directory helm
	@v='$(VERSION)' && mkdir -p $(LOCAL) && tmp=$$(mktemp -d $(LOCAL)/chart.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	HOME=$$tmp $(BIN)/helm package charts/cos-externalizer --version "$${v#v}" --app-version "$$v" --destination $$tmp >/dev/null && \
	tar -xmzf $$tmp/cos-externalizer-$${v#v}.tgz -C $$tmp && \
	sed -i 's|^  repository: .*|  repository: $(REGISTRY)|' $$tmp/cos-externalizer/values.yaml && \
	grep -qx '  repository: $(REGISTRY)' $$tmp/cos-externalizer/values.yaml && \
	tar --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner --mode=u+rw,go=rX -cf - -C $$tmp cos-externalizer | \
		gzip -n -9 > $(RELEASE_DIR)/cos-externalizer-$${v#v}.tgz && \
	HOME=$$tmp $(BIN)/helm lint --strict $(RELEASE_DIR)/cos-externalizer-$${v#v}.tgz >/dev/null && \
	echo "wrote cos-externalizer-$${v#v}.tgz: the chart, version $${v#v}, appVersion $$v"
	$(RELEASE_WORK)/image-builder check-layout -layout $(RELEASE_DIR)/image -version $(VERSION) -revision '$(REVISION)' \
		-sbom $(RELEASE_DIR)/sbom.spdx.json -arches $(IMAGE_ARCHES_CSV)
	chmod -R a+rX $(RELEASE_DIR)
	cd $(RELEASE_DIR) && find . -type f ! -name sha256sums.txt | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum > sha256sums.txt
	@echo "release $(VERSION) ($(REVISION), SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)) in $(RELEASE_DIR:$(ROOT)/%=%):"
	@cd $(RELEASE_DIR) && find . -maxdepth 1 -type f -printf '  %-36P %s bytes\n' | LC_ALL=C sort && \
		echo "  image/ (OCI image layout: $$(du -sb image | cut -f1) bytes, index $$(cat $(RELEASE_WORK)/oci.digest))"
	@echo "push it: docs/release.md"

##@ Test

.PHONY: test
# TEST_FIRST: the packages that run longest, longest first, then every other package (go list drops
# the repeats). go test starts the packages' runs in the order given, two at a time on 2 cores, so the
# long ones start at once and the short ones fill both lanes at the end: in name order the longest
# started last and ran alone. Times: docs/benchmarks/2026-11-26-make-test-order.md.
TEST_FIRST := ./test/integration/plugin ./test/integration/deploy ./test/adversarial ./test/integration/webhook \
	./test/integration/controller ./test/controlplane ./test/integration/helm ./test/cmd/localcluster \
	./test/integration/api ./certs/servingcert ./test/integration/objectdata
# -vet=off: lint has run go vet ./..., whose analyzers include every one go test runs; go test's own
# subset would analyze every package and dependency again (its flags key another cache entry).
# TEST_LDFLAGS: the test binaries are linked anew at every run (the build cache keeps compiled
# packages, not test binaries), one per package; without DWARF (-w) each link takes about a third
# less CPU. Stack traces and t.Errorf keep their files and lines (the runtime's line table stays).
TEST_LDFLAGS := -w
# The e2e suite (test/e2e/local) runs beside the packages' two lanes, as a third process: most of its
# time is waiting (certificate lifetimes, a Lease, rollouts), as is most of theirs, so the cores have
# room (run after them it added its ~110 s to every run). Its output is kept aside in $(E2E_LOG) and
# printed after the packages', whole. By then every package it imports is compiled: lint's go vet
# and image-check built them, so the two go test processes do not compile the same packages twice.
# E2E_BESIDE=0 runs it after the packages instead, for a machine with less room than 2 idle cores.
E2E_LOG := $(LOCAL)/e2e-test.log
E2E_BESIDE ?= 1
# make test runs the tests of the product only; make check runs what is not one (generated files,
# linters, the image of every arch), so that make test's first run on a fresh machine builds neither
# golangci-lint nor the cross-compiled manager (docs/benchmarks/2026-11-27-cold-make-test.md). CI
# runs both (.ci/run).
test: test-tools ## Run every test (unit, API and integration against a real local control plane).
	@mkdir -p $(LOCAL)
	pkgs=$$($(GO) list $(TEST_FIRST) ./... | grep -v '/test/e2e/local$$') || exit 1; \
	e2e() { $(GO) test -count=1 -vet=off -ldflags='$(TEST_LDFLAGS)' -timeout 20m ./test/e2e/local/ >$(E2E_LOG) 2>&1; }; \
	if [ '$(E2E_BESIDE)' = 1 ]; then e2e & e2e_pid=$$!; fi; \
	rc=0; $(GO) test -count=1 -vet=off -ldflags='$(TEST_LDFLAGS)' -timeout 30m $$pkgs || rc=$$?; \
	e2e_rc=0; if [ '$(E2E_BESIDE)' = 1 ]; then wait $$e2e_pid || e2e_rc=$$?; else e2e || e2e_rc=$$?; fi; \
	echo "# test/e2e/local, run $(if $(filter 1,$(E2E_BESIDE)),beside,after) the packages above:"; cat $(E2E_LOG); \
	[ $$rc = 0 ] && [ $$e2e_rc = 0 ]

# The tools and data make test needs, TOOLS_JOBS recipes at a time: on a fresh machine one build's
# module downloads and its tail (the last packages, the links) leave a core idle that another takes.
# Once bin/ holds them, nothing runs. -s: every recipe of theirs prints its own commands (set -x).
TOOLS_JOBS ?= 2
.PHONY: test-tools check
test-tools:
	@$(MAKE) -s --no-print-directory -j$(TOOLS_JOBS) control-plane certmanager helm testdata

check: verify lint image-check ## What is not a test of the product (CI runs it after make test): make verify, make lint and make image-check.

# The adversarial sequence test (test/adversarial, docs/adversarial.md): `make test` runs its fixed seed;
# soak runs any seed for STEPS steps or for DURATION (e.g. 30m), or replays a printed sequence
# (REPLAY='[...]'). A failure prints its seed and the shortest failing sequence it found within SHRINK.
# WORKERS=N (N > 1) runs rounds of N ops at once with the new ops and the nemesis (NEMESIS=0: none);
# BURST=N large creates per burst; PENDING=gate,... (or all) holds the invariants of unlanded fixes.
SEED ?=
STEPS ?=
DURATION ?=
REPLAY ?=
SHRINK ?=
WORKERS ?=
NEMESIS ?=
BURST ?=
PENDING ?=

.PHONY: soak
soak: control-plane testdata ## Run the adversarial sequence test long: SEED=N, STEPS=N or DURATION=30m, REPLAY='[...]', SHRINK=10m, WORKERS=N, NEMESIS=0, BURST=N, PENDING=all.
	$(if $(SEED),COS_ADV_SEED=$(SEED)) $(if $(STEPS),COS_ADV_STEPS=$(STEPS)) $(if $(DURATION),COS_ADV_DURATION=$(DURATION)) \
	$(if $(SHRINK),COS_ADV_SHRINK=$(SHRINK)) $(if $(REPLAY),COS_ADV_REPLAY='$(REPLAY)') \
	$(if $(WORKERS),COS_ADV_WORKERS=$(WORKERS)) $(if $(NEMESIS),COS_ADV_NEMESIS=$(NEMESIS)) \
	$(if $(BURST),COS_ADV_BURST=$(BURST)) $(if $(PENDING),COS_ADV_PENDING=$(PENDING)) \
		$(GO) test -count=1 -timeout 0 -run TestAdversarial -v ./test/adversarial/

# GitOps engines on ClusterObjectSets (docs/gitops.md#health), with their own code at pinned releases,
# in tool modules: hack/tools/argocd (Argo CD's health assessment and gitops-engine's sync) and
# hack/tools/flux (Flux's CEL health checks and kstatus) need Go 1.27 (the go command fetches
# GOTOOLCHAIN from the module proxy once); hack/tools/fluxcontrollers (source-controller and
# kustomize-controller, built into bin/flux/ on first use) builds with the Go of the rest. test-gitops-health
# checks the health checks on their testdata (no cluster); test-gitops also runs the end-to-end tests:
# a two-wave sync with gitops-engine, and the Flux controllers as processes on the local control plane.
GITOPS_GO := GOTOOLCHAIN=go1.27.3 $(GO)
FLUX_BIN := $(BIN)/flux
FLUX_KUSTOMIZE_VERSION := $(shell awk '$$1=="github.com/fluxcd/kustomize-controller" {print $$2; exit}' hack/tools/fluxcontrollers/go.mod)
FLUX_SOURCE_VERSION := $(shell awk '$$1=="github.com/fluxcd/source-controller" {print $$2; exit}' hack/tools/fluxcontrollers/go.mod)
FLUX_STAMP := $(FLUX_BIN)/.stamp-flux-source-$(FLUX_SOURCE_VERSION)-kustomize-$(FLUX_KUSTOMIZE_VERSION)-$(call pins,hack/tools/fluxcontrollers/go.mod hack/tools/fluxcontrollers/go.sum)

$(FLUX_STAMP):
	@mkdir -p $(FLUX_BIN)
	cd hack/tools/fluxcontrollers && $(GO) build -ldflags "-s -w" -o $(FLUX_BIN)/ \
		github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller
	@$(call stamp,$(FLUX_BIN)/.stamp-flux-*)

.PHONY: flux-controllers
flux-controllers: $(FLUX_STAMP) ## Build Flux's source-controller and kustomize-controller (pinned in hack/tools/fluxcontrollers) into bin/flux/.

.PHONY: test-gitops-health
test-gitops-health: ## Argo CD's and Flux's own health code on ClusterObjectSets: hack/argocd's health check and hack/flux's healthCheckExprs on their testdata.
	cd hack/tools/argocd && $(GITOPS_GO) test -count=1 ./...
	cd hack/tools/flux && $(GITOPS_GO) test -count=1 ./...

.PHONY: test-gitops
test-gitops: control-plane $(FLUX_STAMP) test-gitops-health ## GitOps end to end (not in make test): gitops-engine's sync waves, and Flux's controllers with wait/dependsOn on the local control plane.
	cd hack/tools/argocd && $(GITOPS_GO) test -tags gitops_e2e -count=1 -timeout 15m -run TestSyncWaves -v ./...
	cd hack/tools/flux && FLUX_BIN_DIR=$(FLUX_BIN) \
		FLUX_SOURCE_CONTROLLER_DIR=$$(cd ../fluxcontrollers && $(GO) list -m -f '{{.Dir}}' github.com/fluxcd/source-controller) \
		FLUX_KUSTOMIZE_CONTROLLER_DIR=$$(cd ../fluxcontrollers && $(GO) list -m -f '{{.Dir}}' github.com/fluxcd/kustomize-controller) \
		$(GITOPS_GO) test -tags gitops_e2e -count=1 -timeout 15m -run TestFluxEndToEnd -v ./...

.PHONY: test-unit
test-unit: ## Run the tests that need no control plane and no downloaded bundles (pure packages).
	$(GO) test -count=1 ./api/... ./certs/... ./controllers/... ./internal/... ./webhook/... ./cmd/... ./test/builders/... ./test/framework/...

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

.PHONY: test-e2e
test-e2e: image testdata $(HELM_STAMP) ## End-to-end suite on a kind cluster (needs Docker and kind; not run by `make test`).
	@command -v $(KIND) >/dev/null || { echo "kind is not installed; e2e on kind needs Docker and kind (the same suite runs locally: make test-e2e-local; without a registry: make test-e2e-sources)"; exit 1; }
ifneq ($(KIND_AUTH),)
	@grep -q 'admission-control-config-file: /etc/kubernetes/admission/admission-configuration.yaml' '$(KIND_CONFIG)' && grep -q 'hostPath: $(KIND_WEBHOOK_AUTH)$$' '$(KIND_CONFIG)' || \
		{ echo "$(KIND_CONFIG): no API server client certificate for the webhooks (the mount of $(KIND_WEBHOOK_AUTH) and the admission-control-config-file patch of test/e2e/kind/cluster.yaml); add them, or KIND_WEBHOOK_CLIENT_AUTH=0"; exit 1; }
	$(GO) run ./hack/kind/webhookauth -dir $(KIND_WEBHOOK_AUTH)
endif
	$(KIND) get clusters | grep -qx '$(KIND_CLUSTER)' || $(KIND) create cluster --name $(KIND_CLUSTER) --wait 5m \
		$(if $(KIND_IMAGE),--image $(KIND_IMAGE)) $(if $(KIND_CONFIG),--config $(KIND_CONFIG))
	@mkdir -p $(LOCAL)
	$(KIND) export kubeconfig --name $(KIND_CLUSTER) --kubeconfig $(LOCAL)/kind-kubeconfig
ifneq ($(KIND_AUTH),)
	@# A cluster kept from before (created without the patch) would have every admission refused.
	@KUBECONFIG=$(LOCAL)/kind-kubeconfig kubectl -n kube-system get pods -l component=kube-apiserver -o jsonpath='{.items[*].spec.containers[*].command}' | \
		grep -q 'admission-control-config-file=/etc/kubernetes/admission/' || \
		{ echo "kind cluster $(KIND_CLUSTER): its API server presents no client certificate to webhooks (created before, or with another config); recreate it: $(KIND) delete cluster --name $(KIND_CLUSTER)"; exit 1; }
endif
ifneq ($(KIND_NETWORK_POLICY),)
	KUBECONFIG=$(LOCAL)/kind-kubeconfig kubectl apply --server-side -f $(KIND_NETWORK_POLICY)
	KUBECONFIG=$(LOCAL)/kind-kubeconfig kubectl -n kube-system rollout status daemonset/kube-router --timeout=5m
endif
	KUBECONFIG=$(LOCAL)/kind-kubeconfig kubectl apply --server-side -f $(CERTMANAGER_MANIFEST)
	KUBECONFIG=$(LOCAL)/kind-kubeconfig kubectl wait --for=condition=Available --timeout=5m -n cert-manager deployment --all
	$(KIND) load image-archive $(IMAGE_ARCHIVE) --name $(KIND_CLUSTER)
	IMG=$(IMG) KUBECONFIG=$(LOCAL)/kind-kubeconfig $(if $(KIND_AUTH),E2E_WEBHOOK_AUTH_DIR=$(ROOT)/$(KIND_WEBHOOK_AUTH)) E2E_PROBE_IMAGE=$(E2E_PROBE_IMAGE) E2E_HELM=$(BIN)/helm \
		$(GO) test -tags e2e_kind -count=1 -timeout 30m -v ./test/e2e/kind/

# What test-e2e-sources builds: kubelet, kubeadm and kube-proxy (from hack/tools/controlplane, the
# release of the local control plane), kind and CoreDNS (at the version the pinned kubeadm asks for),
# into bin/kind-tools/.
KIND_TOOLS := $(BIN)/kind-tools
KIND_VERSION := $(shell awk '$$1=="require" && $$2=="sigs.k8s.io/kind" {print $$3}' hack/tools/kind/go.mod)
COREDNS_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/coredns/coredns" {print $$3}' hack/tools/coredns/go.mod)
KIND_TOOLS_STAMP := $(KIND_TOOLS)/.stamp-$(KUBE_VERSION)-kind-$(KIND_VERSION)-coredns-$(COREDNS_VERSION)-$(call pins,$(foreach d,controlplane kind coredns,hack/tools/$(d)/go.mod hack/tools/$(d)/go.sum))
KIND_NODE_IMAGE := cos-kind-node:$(KUBE_VERSION)
KIND_WORK := $(BIN)/kind
KIND_CERTMANAGER_MANIFEST := $(KIND_WORK)/cert-manager.yaml
# etcd's image tag is its version (kubeadm asks for its own; the kind config sets it); pause's is the
# one of the pinned Kubernetes' build/pause.
ETCD_IMAGE_TAG := $(patsubst v%,%,$(ETCD_VERSION))-0
PAUSE_TAG = $(shell awk '$$1=="TAG" && $$2=="?=" {print $$3}' $$(cd $(CONTROLPLANE_DIR) && $(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/Makefile)

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
KUBEROUTER_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/cloudnativelabs/kube-router/v2" {print $$3}' hack/tools/kuberouter/go.mod)
KUBEROUTER_DIR := $(BIN)/kube-router
KUBEROUTER_STAMP := $(KUBEROUTER_DIR)/.stamp-kube-router-$(KUBEROUTER_VERSION)-$(call pins,hack/tools/kuberouter/go.mod hack/tools/kuberouter/go.sum)
KUBEROUTER_IMAGE := cos-e2e.local/kube-router:$(KUBEROUTER_VERSION)

.PHONY: kube-router
kube-router: $(KUBEROUTER_STAMP) ## Build kube-router into bin/kube-router/ (the NetworkPolicy enforcer of test-e2e-sources' cluster).

$(KUBEROUTER_STAMP):
	@mkdir -p $(KUBEROUTER_DIR)
	cd hack/tools/kuberouter && CGO_ENABLED=0 $(GO) build -ldflags "-s -w" -o $(KUBEROUTER_DIR)/kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
	@$(call stamp,$(KUBEROUTER_DIR)/.stamp-*)

.PHONY: kind-host
kind-host: ## Install Docker and debootstrap from apt if missing, and start dockerd if none answers (for test-e2e-sources).
	@command -v dockerd >/dev/null && command -v debootstrap >/dev/null || { echo "installing docker.io and debootstrap from apt"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null; }
	@mkdir -p $(LOCAL)
	@docker info >/dev/null 2>&1 || { echo "starting dockerd (log: .local/dockerd.log; stop it with: kill \$$(cat .local/dockerd.pid))"; \
		nohup dockerd --storage-driver=overlay2 >$(LOCAL)/dockerd.log 2>&1 & echo $$! >$(LOCAL)/dockerd.pid; \
		for i in $$(seq 60); do docker info >/dev/null 2>&1 && exit 0; sleep 1; done; tail -20 $(LOCAL)/dockerd.log; exit 1; }

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

.PHONY: bench
bench: control-plane testdata certmanager ## Run the benchmarks (how to run them, targets and dated results: docs/benchmarks/); about 16 minutes once built.
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...
	$(GO) test -run '^$$' -bench BenchmarkAdmission -benchtime=30x -timeout 30m ./test/integration/webhook/
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 60m ./test/bench/
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 30m ./test/bench/plugin/
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 40m ./test/bench/admission/
	$(GO) test -run '^$$' -bench . -benchtime=3x -timeout 30m ./test/e2e/local/

# The scale benchmark (test/bench/scale; results in docs/benchmarks/, "scale"): 1,000 ClusterObjectSets
# on one local control plane, every benchmark; then a restart at 3,000. Not part of test or bench:
# about 25 minutes. COS_SCALE_OWNERS=N (200; 5 revisions each), COS_SCALE_REVISIONS,
# COS_SCALE_OBJECTS, COS_SCALE_WINDOW, COS_SCALE_DRIFT, COS_SCALE_NOISE make it smaller or shorter;
# COS_SCALE_MANAGER=path measures another manager binary, COS_SCALE_MEMORY_LIMIT=384Mi tells the
# managers a container limit, COS_SCALE_PROFILE=dir writes CPU and heap profiles of the restart.
.PHONY: bench-scale
bench-scale: control-plane testdata ## Scale benchmark: 1,000 ClusterObjectSets (restart and failover writes, settling, memory, steady-state requests, admission under 20 clients), then a restart at 3,000 (~25 min).
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 60m ./test/bench/scale/
	COS_SCALE_OWNERS=600 $(GO) test -run '^$$' -bench 'BenchmarkScaleRestart$$' -benchtime=1x -timeout 60m ./test/bench/scale/

# The largest size of the scale benchmark: 10,000 ClusterObjectSets (2,000 owners, 60,000 managed
# objects), a restart without and with a container memory limit of 320Mi, and a leader failover
# (with it). Its fixture alone takes 15-30 minutes on 2 cores.
.PHONY: bench-scale-large
bench-scale-large: control-plane testdata ## Scale benchmark at 10,000 ClusterObjectSets and 60,000 objects: restart and failover writes, settling, memory (~30-45 min).
	COS_SCALE_OWNERS=2000 COS_SCALE_MEMORY_LIMIT=320Mi $(GO) test -run '^$$' -bench 'BenchmarkScale(Restart|Failover)$$' -benchtime=1x -timeout 120m ./test/bench/scale/

# The cache memory benchmark (test/bench/cachememory; results in docs/benchmarks/, "object-data
# Secrets and the cache"): the manager's memory with 1 GiB of object-data Secrets stored. Not part of
# test or bench: about 2 minutes a binary. COS_CACHEMEM_SECRETS, COS_CACHEMEM_SIZE make it smaller;
# COS_CACHEMEM_MANAGER=path measures another manager binary, COS_CACHEMEM_BASELINE=[name=]path,...
# more binaries first on the same fixture.
.PHONY: bench-cache-memory
bench-cache-memory: control-plane ## Manager memory (RSS, peak, heap) and Secret reads per reconcile with 1 GiB of object-data Secrets stored (~2 min a binary).
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 60m ./test/bench/cachememory/

.PHONY: testdata
testdata: $(TESTDATA_STAMP) ## Fetch the real test bundles (prometheus-operator CRDs, Argo CD install) into bin/testdata/.

# The bundles are files of Go module zips pinned in hack/tools/testdata/go.mod and checked against its
# go.sum. They are copied out of the module cache into a fresh folder that replaces the old one whole.
$(TESTDATA_STAMP):
	@$(call adopt,$(TESTDATA)/.stamp-prometheus-operator-$(PROMOP_VERSION)-argocd-$(ARGOCD_VERSION)) || { \
	echo "fetching test bundles: $(PROMOP_MODULE) $(PROMOP_VERSION), $(ARGOCD_MODULE) $(ARGOCD_VERSION)"; set -x; \
	cd hack/tools/testdata && $(GO) mod download $(PROMOP_MODULE) $(ARGOCD_MODULE) && \
	rm -rf $(TESTDATA).tmp && mkdir -p $(TESTDATA).tmp/prometheus-operator-crds $(TESTDATA).tmp/argocd-install && \
	promop=$$($(GO) list -m -f '{{.Dir}}' $(PROMOP_MODULE)) && argocd=$$($(GO) list -m -f '{{.Dir}}' $(ARGOCD_MODULE)) && \
	cp "$$promop"/example/prometheus-operator-crd-full/*.yaml $(TESTDATA).tmp/prometheus-operator-crds/ && \
	cp "$$argocd"/manifests/install.yaml $(TESTDATA).tmp/argocd-install/ && \
	chmod -R u+w $(TESTDATA).tmp && touch $(TESTDATA).tmp/$(notdir $@) && \
	rm -rf $(TESTDATA) && mv $(TESTDATA).tmp $(TESTDATA); }

.PHONY: certmanager-crds
certmanager-crds: $(CERTMANAGER_CRDS_STAMP) ## Fetch cert-manager's CRDs (for the deploy tests) into bin/testdata/certmanager-crds/.

# The CRDs are the deploy/crds/*.yaml of the cert-manager module pinned in
# hack/tools/controlplane/go.mod (checked against its go.sum), copied out of the module cache.
$(CERTMANAGER_CRDS_STAMP):
	@$(call adopt,$(CERTMANAGER_CRDS)/.stamp-cert-manager-$(CERTMANAGER_VERSION)) || { \
	echo "fetching cert-manager's CRDs: $(CERTMANAGER_MODULE) $(CERTMANAGER_VERSION)"; set -x; \
	cd $(CONTROLPLANE_DIR) && $(GO) mod download $(CERTMANAGER_MODULE) && \
	rm -rf $(CERTMANAGER_CRDS).tmp && mkdir -p $(CERTMANAGER_CRDS).tmp && \
	cp "$$($(GO) list -m -f '{{.Dir}}' $(CERTMANAGER_MODULE))"/deploy/crds/*.yaml $(CERTMANAGER_CRDS).tmp/ && \
	chmod -R u+w $(CERTMANAGER_CRDS).tmp && touch $(CERTMANAGER_CRDS).tmp/$(notdir $@) && \
	rm -rf $(CERTMANAGER_CRDS) && mv $(CERTMANAGER_CRDS).tmp $(CERTMANAGER_CRDS); }

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
	@test -f config/$(OVERLAY)/kustomization.yaml || { echo "no overlay config/$(OVERLAY)"; exit 1; }
	@# An image no node can pull leaves the fail-closed webhooks refusing every inline ClusterObjectSet:
	@# deploy only one pinned by digest (a release's), the one `make image` built, or one said pushed.
	@img='$(IMG)'; if [ '$(IMG_VERIFIED)' = 1 ]; then echo "image $$img: IMG_VERIFIED=1, not checked"; \
	elif [[ "$$img" == *@sha256:* ]]; then echo "image $$img: pinned by digest"; \
	elif [ -f '$(IMAGE_ARCHIVE)' ] && tar -xOf '$(IMAGE_ARCHIVE)' manifest.json 2>/dev/null | grep -qF "\"$$img\""; then \
		echo "image $$img: built by make image into $(IMAGE_ARCHIVE:$(ROOT)/%=%); a kind cluster needs it loaded first:"; \
		echo "  kind load image-archive $(IMAGE_ARCHIVE:$(ROOT)/%=%) --name $(KIND_CLUSTER)"; \
	else echo "deploy: image $$img was neither built by make image nor pinned by digest: if no node can pull it, the"; \
		echo "fail-closed webhooks refuse every inline ClusterObjectSet. Either"; \
		echo "  build it and load it into kind:  make image IMG=$$img && kind load image-archive $(IMAGE_ARCHIVE:$(ROOT)/%=%) --name $(KIND_CLUSTER)"; \
		echo "  deploy a release's image:        make deploy IMG=$(REGISTRY)@sha256:... (as dist/<version>/install.yaml names it)"; \
		echo "  or push it to a registry the nodes pull from (docs/release.md: crane push, skopeo copy), then"; \
		echo "                                   make deploy IMG=$$img IMG_VERIFIED=1"; exit 1; fi
	@# The image is set in a throwaway kustomization over the overlay (in .local/: kustomize wants a
	@# relative path), so no committed file changes.
	@mkdir -p $(LOCAL) && tmp=$$(mktemp -d $(LOCAL)/deploy.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && img='$(IMG)' && \
	case "$$img" in \
		*@*) name=$${img%%@*}; ref="digest: $${img#*@}";; \
		*) if [[ "$${img##*/}" == *:* ]]; then name=$${img%:*}; ref="newTag: $${img##*:}"; else name=$$img; ref="newTag: latest"; fi;; \
	esac && \
	printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\nimages:\n- name: cos-externalizer\n  newName: %s\n  %s\n' \
		"../../config/$(OVERLAY)" "$$name" "$$ref" > "$$tmp/kustomization.yaml" && \
	if [ -n '$(strip $(DEPLOY_COMPONENTS))' ]; then printf 'components:\n' >> "$$tmp/kustomization.yaml" && \
		for c in $(DEPLOY_COMPONENTS); do test -f "config/$$c/kustomization.yaml" || { echo "no component config/$$c"; exit 1; }; \
			printf -- '- ../../config/%s\n' "$$c" >> "$$tmp/kustomization.yaml"; done; fi && \
	ops='' && for a in $(DEPLOY_ARGS); do ops="$$ops    - {op: add, path: /spec/template/spec/containers/0/args/-, value: \"$$a\"}"$$'\n'; done && \
	if [ -n '$(DEPLOY_REPLICAS)' ]; then ops="$$ops    - {op: replace, path: /spec/replicas, value: $(DEPLOY_REPLICAS)}"$$'\n'; fi && \
	if [ -n "$$ops" ]; then printf 'patches:\n- target: {group: apps, kind: Deployment, name: cos-externalizer}\n  patch: |-\n%s' "$$ops" >> "$$tmp/kustomization.yaml"; fi && \
	echo "deploying config/$(OVERLAY)$(if $(DEPLOY_COMPONENTS), + $(DEPLOY_COMPONENTS)) with image $$img$(if $(DEPLOY_REPLICAS), and $(DEPLOY_REPLICAS) replicas)$(if $(DEPLOY_ARGS), and flags $(DEPLOY_ARGS))" && \
	$(KUBECTL) kustomize "$$tmp" | $(KUBECTL) apply --server-side --field-manager=cos-externalizer-deploy -f -

.PHONY: undeploy
undeploy: $(KUBECTL_DEP) ## Uninstall config/$OVERLAY and KEEP every workload (hack/uninstall.sh): webhooks and manager go, our finalizers are released; ClusterObjectSets, their objects and Secrets, the CRD and the namespace stay. DRY_RUN=1 shows it.
	@test -f config/$(OVERLAY)/kustomization.yaml || { echo "no overlay config/$(OVERLAY)"; exit 1; }
	KUBECTL='$(KUBECTL)' hack/uninstall.sh $(if $(DRY_RUN),--dry-run) -k config/$(OVERLAY)

.PHONY: undeploy-all
undeploy-all: $(KUBECTL_DEP) ## DESTROYS WORKLOADS, needs CONFIRM=yes: deletes every ClusterObjectSet, so the manager tears down EVERYTHING they installed (CRDs and custom resources too), then config/$OVERLAY with the CRD and the namespace.
	@test -f config/$(OVERLAY)/kustomization.yaml || { echo "no overlay config/$(OVERLAY)"; exit 1; }
	@test '$(CONFIRM)' = yes || { echo "undeploy-all deletes every ClusterObjectSet and EVERYTHING THEY INSTALLED (CRDs and custom resources"; \
		echo "included), then the CRD and the namespace with the object-data Secrets. To keep the workloads: make undeploy."; \
		echo "To go on: make undeploy-all CONFIRM=yes"; exit 1; }
	KUBECTL='$(KUBECTL)' hack/uninstall.sh --delete-workloads --yes -k config/$(OVERLAY)

##@ Helm

# The chart charts/cos-externalizer is generated from the overlays of config/ by hack/gen/helmgen (kubectl
# kustomize of each mode's overlay, values substituted at known paths); never edit it by hand: make verify
# regenerates it. CHART_VERSION is the chart's version; its appVersion is the overlays' image tag.
CHART_VERSION ?= 0.1.0
# helm at the version pinned in hack/tools/helm/go.mod, with the Kubernetes version of its client-go as
# the one `helm template` and `helm lint` assume.
HELM_K8S_MINOR := $(word 2,$(subst ., ,$(shell awk '$$1=="k8s.io/client-go" {print $$2}' hack/tools/helm/go.mod)))

.PHONY: chart
chart: $(CONTROLPLANE_STAMP) ## Regenerate the Helm chart charts/cos-externalizer from the overlays of config/.
	$(GO) run ./hack/gen/helmgen -kubectl $(BIN)/kubectl -config config -out charts/cos-externalizer -version $(CHART_VERSION) \
		-registry $(REGISTRY)

.PHONY: helm
helm: $(HELM_STAMP) ## Build helm into bin/ (pinned in hack/tools/helm; the chart test runs it).

HELM_OLD_STAMP := $(BIN)/.stamp-helm-$(HELM_VERSION)
$(HELM_STAMP):
	@mkdir -p $(BIN)
	@$(call adopt,$(HELM_OLD_STAMP),$(BIN)/helm=hack/tools/helm/go.mod) || { \
	echo "building helm $(HELM_VERSION) (first time: ~1 min after the control plane's build)"; set -x; \
	cd hack/tools/helm && $(GO) build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR) \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR)" \
		-o $(BIN)/helm helm.sh/helm/v3/cmd/helm; }
	@$(call stamp,$(BIN)/.stamp-helm-*,$(HELM_OLD_STAMP))

##@ Local control plane

.PHONY: tools
tools: control-plane certmanager helm testdata $(GOLANGCI_LINT_STAMP) $(ACTIONLINT_STAMP) ## Build every pinned tool into bin/ and fetch the test bundles (CI caches bin/).

.PHONY: control-plane
control-plane: $(CONTROLPLANE_STAMP) ## Build etcd, kube-*, kubectl and kwok (and cert-manager's controller and cainjector, from the same module) into bin/ (first time ~15 min on 2 idle cores).

.PHONY: certmanager
certmanager: $(CONTROLPLANE_STAMP) $(CERTMANAGER_CRDS_STAMP) ## Build cert-manager's controller and cainjector (with the control plane, from the same module) into bin/ and fetch its CRDs.

# Everything hack/tools/controlplane pins, in one go build: etcd (its own entry point, etcd/main.go),
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, and cert-manager's controller
# and cainjector (small mains over its library, for tests that start cert-manager beside the local
# control plane: test/controlplane.StartCertManager). One module and one build, so the libraries they
# share (k8s.io/*, gRPC, protobuf, OpenTelemetry...) are compiled once (docs/benchmarks/2026-11-27-cold-make-test.md).
# Each binary keeps its own link flags (-ldflags=PATTERN=FLAGS applies to the main packages PATTERN
# matches); kwok-stages.yaml is the kwok stages the local control plane loads.
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
