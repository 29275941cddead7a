# The benchmarks, and the test data the tests and the benchmarks read. No `##@` header: make help
# lists these targets under Test (make/test.mk and make/e2e.mk, included just before).

.PHONY: bench
bench: control-plane testdata certmanager ## Run the benchmarks (how to run them, targets and dated results: docs/benchmarks/); about 16 minutes once built.
	$(GO) test -run '^$$' -bench . -benchmem ./internal/... ./webhook/admission/... ./controllers/reconciler/... ./cmd/kubectl-cos/plugin/...
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

# The data the tests read (make/tools.mk fetches it).
.PHONY: testdata
testdata: $(TESTDATA_STAMP) ## Fetch the real test bundles (prometheus-operator CRDs, Argo CD install) into bin/testdata/.

.PHONY: certmanager-crds
certmanager-crds: $(CERTMANAGER_CRDS_STAMP) ## Fetch cert-manager's CRDs (for the deploy tests) into bin/testdata/certmanager-crds/.
