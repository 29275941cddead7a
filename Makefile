# cos-externalizer. `make help` lists the targets.
#
# This file holds the settings every build shares and the development targets; the rest is in make/,
# one file a concern, included below in the order `make help` lists them:
#
#   make/tools.mk    the pinned tools and data of bin/ (versions, stamps, how each is built or fetched)
#   make/plugin.mk   kubectl cos and its release archives
#   make/image.mk    the manager's image, without Docker (hack/tools/image)
#   make/release.mk  make release (hack/release.sh)
#   make/test.mk     make test and the test targets around it (hack/test.sh)
#   make/e2e.mk      the e2e suite on kind and on the local control plane (hack/kind/)
#   make/bench.mk    the benchmarks, and the test data they and the tests read
#   make/deploy.mk   deploy and undeploy into a cluster (hack/deploy.sh, hack/uninstall.sh)
#   make/helm.mk     the Helm chart
#   make/local.mk    the local control plane, make run, make clean
#
# Recipes stay a few lines: what is a program is a script of hack/ that the recipe runs.

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

# The manager's version, stamped into its binary (app.Version) and its image's label; `git describe`
# runs once, on first use (VERSION=... overrides it).
VERSION ?= $(eval VERSION := $$(or $$(shell git describe --tags --always --dirty 2>/dev/null),dev))$(VERSION)
VERSION_LDFLAGS = -X github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app.Version=$(VERSION)
# The one timestamp of the release's archives and image: the commit's time, so one commit gives one
# set of digests (https://reproducible-builds.org/specs/source-date-epoch/). Read once, on first use.
SOURCE_DATE_EPOCH ?= $(eval SOURCE_DATE_EPOCH := $$(or $$(shell git log -1 --format=%ct 2>/dev/null),0))$(SOURCE_DATE_EPOCH)
# The commit, read once (other commits may land while make runs).
REVISION ?= $(eval REVISION := $$(shell git rev-parse HEAD 2>/dev/null))$(REVISION)

include make/tools.mk

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
lint: golangci-lint actionlint ## gofmt check, go vet, golangci-lint, actionlint, and shellcheck on hack/'s scripts when on PATH (make check runs it).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt'ed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if command -v shellcheck >/dev/null; then shellcheck -S warning $$(git ls-files 'hack/*.sh') hack/kind/bin/docker; \
	else echo "lint: shellcheck is not on PATH; hack/'s scripts are not checked (Debian: apt-get install shellcheck)"; fi

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT_STAMP) ## Run golangci-lint (pinned in hack/tools/golangci-lint, configured in .golangci.yml).
	$(BIN)/golangci-lint run ./...
	cd hack/tools/image && $(BIN)/golangci-lint run --config $(ROOT)/.golangci.yml ./...

.PHONY: actionlint
actionlint: $(ACTIONLINT_STAMP) ## Lint .github/workflows (actionlint, pinned in hack/tools/actionlint; with shellcheck on PATH it checks run: scripts too), actions pinned by commit SHA.
	$(BIN)/actionlint
	@! grep -nE '^[ -]*uses: ' .github/workflows/*.yml | grep -vE 'uses: (\./[^ ]*|[^ @]+@[0-9a-f]{40})( |$$)' || { echo "pin these actions by full commit SHA (docs/ci.md)"; exit 1; }

.PHONY: build
build: ## Build the manager binary into bin/.
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/cos-externalizer ./cmd/cos-externalizer

include make/plugin.mk make/image.mk make/release.mk make/test.mk make/e2e.mk make/bench.mk make/deploy.mk \
	make/helm.mk make/local.mk
