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
# runs make test (.ci/run), then make check (.github/workflows/ci.yml).
test: test-tools ## Run every test (unit, API and integration against a real local control plane).
	@mkdir -p $(LOCAL)
	GO=$(GO) TEST_LDFLAGS='$(TEST_LDFLAGS)' E2E_LOG=$(E2E_LOG) E2E_BESIDE=$(E2E_BESIDE) hack/test.sh $(TEST_FIRST)

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
