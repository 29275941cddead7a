// Package adversarial_test is the project's own Jepsen for this controller: a seeded, randomized
// sequence of what users, GitOps tools, admins and failures do to ClusterObjectSets and their
// Secrets, run against a real local control plane and the manager, with the invariants checked after
// every step and at quiescence. docs/adversarial.md describes the model, the operations and the
// invariants.
//
//	COS_ADV_SEED=N       the seed (default the fixed seed of `make test`)
//	COS_ADV_STEPS=N      how many steps (default 36)
//	COS_ADV_DURATION=D   run for D instead (a soak)
//	COS_ADV_REPLAY=JSON  replay a printed sequence instead of generating one
//	COS_ADV_SHRINK=D     how long a failure may spend finding a shorter sequence (default 4m; 0: none)
//	COS_ADV_WORKERS=N    concurrent workers: N > 1 runs rounds of N ops at once with the new ops
//	                     (default defaultWorkers; the fixed seed's steps are then rounds)
//	COS_ADV_NEMESIS=0|1  with workers, the nemesis beside the rounds (default 1)
//	COS_ADV_BURST=N      how many large creates a burst sends at once (default 2)
//	COS_ADV_PENDING=...  open gates: invariants and ops of unlanded fixes and known windows (gates; "all")
package adversarial_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// defaultSeed is the seed of the fixed run in `make test`.
const defaultSeed = 20261124

// defaultWorkers is how many workers the fixed run of `make test` has.
const defaultWorkers = 2

func TestMain(m *testing.M) {
	testenv.RunWith(m, func(ctx context.Context, env *testenv.Environment) (func(), error) {
		testenv.Env = env
		return func() {
			if current != nil {
				_ = current.stop()
			}
		}, nil
	})
}

// harness runs the manager for the runs of this process and watches its log lines.
type harness struct {
	t          *testing.T
	mgr        *testenv.Manager
	grace      time.Duration
	sweepEvery time.Duration
	mu         sync.Mutex
	leak       string
	plantLeak  string
	peak       uint64
	rssPeak    uint64
	untap      func()
	// workers > 1: the concurrent mode; nemesis: the manager talks through proxy, and the nemesis
	// ops are drawn; skew shifts the reconciler's clock of the replicas started from then on.
	workers int
	nemesis bool
	proxy   *proxy
	skew    time.Duration
	// sweepSkew shifts the orphan sweep's clock (app.Options.SweepClock) apart from the
	// reconciler's; traps are the sweep-race ops' armed hooks (app.Options.SweepBeforeDelete).
	sweepSkew time.Duration
	traps     map[*sweepTrap]bool
	// kills are the sweep-kill ops' armed hooks (app.Options.SweepAfterStep); steps are the
	// refs-fail-race ops' (the sweep goes on).
	kills map[*killTrap]bool
	steps map[*stepTrap]bool
	// clientCA is the --webhook-client-ca file of the replicas: a copy of the control plane's, which
	// op client-ca-garbage breaks and mends ("" when the control plane has none).
	clientCA string
}

var current *harness

func newHarness(t *testing.T) *harness {
	if current != nil {
		current.t = t
		return current
	}
	h := &harness{t: t, grace: 5 * time.Second, sweepEvery: time.Second,
		workers: int(envUint("COS_ADV_WORKERS", defaultWorkers))}
	h.nemesis = h.workers > 1 && os.Getenv("COS_ADV_NEMESIS") != "0"
	h.untap = testenv.TapLogs(func(line []byte) {
		if i := bytes.Index(line, []byte(secretMark)); i >= 0 {
			h.mu.Lock()
			if h.leak == "" {
				h.leak = string(line[:i]) // up to the mark: the content itself is never printed
			}
			h.mu.Unlock()
		}
		for _, mark := range []string{plantMark, plantKey} {
			if i := bytes.Index(line, []byte(mark)); i >= 0 {
				h.mu.Lock()
				if h.plantLeak == "" {
					h.plantLeak = string(line[:i])
				}
				h.mu.Unlock()
			}
		}
	})
	go h.sampleHeap(make(chan struct{})) // for the life of the test process
	current = h
	return h
}

func (h *harness) leakedLine() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leak
}

func (h *harness) plantLeakLine() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.plantLeak
}

func (h *harness) start() error {
	if h.mgr != nil {
		return nil
	}
	mgr, err := h.startReplica()
	if err != nil {
		return err
	}
	h.mgr = mgr
	return nil
}

// startReplica starts a manager that takes part in leader election; the webhooks point at it.
func (h *harness) startReplica() (*testenv.Manager, error) {
	env := testenv.Env
	if h.nemesis {
		var err error
		if env, err = h.proxiedEnv(); err != nil {
			return nil, err
		}
	}
	args := []string{"--leader-elect", "--orphan-grace-period=" + h.grace.String(), "--orphan-sweep-interval=" + h.sweepEvery.String(), "--orphan-restore-window=90s", "--keep-archived-revisions=1",
		// OLM's operator-controller exempt, as config/webhook-only makes it (op olm-owners); in the
		// handler only: the generated matchCondition still sends its requests to the guard.
		"--secret-guard-exempt-users=" + webhook.NamespaceControllerUser + "," + webhook.OperatorControllerUser,
		// A bound a forged caller fills in a few seconds (op ledger-fill); a run's own unreferenced
		// Secrets stay far below it.
		"--max-unreferenced-secrets=" + strconv.Itoa(maxUnreferenced)}
	if ca, err := h.clientCAFile(); err != nil {
		return nil, err
	} else if ca != "" {
		args = append(args, "--webhook-client-ca="+ca)
	}
	mgr, err := env.StartManagerWith(context.Background(), h.adjust, args...)
	if err != nil {
		return nil, fmt.Errorf("starting the manager: %w", err)
	}
	return mgr, nil
}

// clientCAFile returns the replicas' --webhook-client-ca: a copy of the control plane's, made once
// ("" when the control plane has none, as an external cluster).
func (h *harness) clientCAFile() (string, error) {
	if h.clientCA != "" || testenv.Env.WebhookClientCA == "" {
		return h.clientCA, nil
	}
	pem, err := os.ReadFile(testenv.Env.WebhookClientCA)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(testenv.Env.Dir, "adv-client-ca-")
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(file, pem, 0o600); err != nil {
		return "", err
	}
	h.clientCA = file
	return file, nil
}

// failover starts a second replica, which the webhooks then call, and kills the first (the leader):
// the second takes the lease over and goes on with whatever the leader was doing.
func (h *harness) failover() error {
	next, err := h.startReplica()
	if err != nil {
		return err
	}
	if h.mgr != nil {
		if err := h.mgr.Stop(); err != nil {
			return err
		}
	}
	h.mgr = next
	return nil
}

func (h *harness) stop() error {
	if h.mgr == nil {
		return nil
	}
	err := h.mgr.Stop()
	h.mgr = nil
	return err
}

func (h *harness) restart() error {
	if err := h.stop(); err != nil {
		return err
	}
	return h.start()
}

var runs int

// newRunner starts a run with names of its own, so runs (and replays while shrinking) never meet.
func (h *harness) newRunner() (*runner, error) {
	if err := h.start(); err != nil {
		return nil, err
	}
	if runs > 0 {
		// The ClusterObjectSets of earlier runs go first: a replay's failures (its heap above all)
		// are its own.
		if err := clearRuns(); err != nil {
			return nil, err
		}
	}
	if h.skew != 0 || h.sweepSkew != 0 {
		// A run (a replay while shrinking above all) starts with the clocks a run starts with.
		h.skew, h.sweepSkew = 0, 0
		if err := h.restart(); err != nil {
			return nil, err
		}
	}
	runs++
	m := newModel(fmt.Sprintf("r%d", runs))
	h.mu.Lock()
	h.peak, h.rssPeak = 0, 0 // a run's heap and RSS peaks are its own
	h.mu.Unlock()
	alice, err := testenv.Env.As("alice")
	if err != nil {
		return nil, err
	}
	olm, err := testenv.Env.As(webhook.OperatorControllerUser)
	if err != nil {
		return nil, err
	}
	if err := h.start(); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.cmNamespace()}}
	if err := testenv.Env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	plant, err := plantSecrets(context.Background(), m)
	if err != nil {
		return nil, err
	}
	return &runner{env: h, m: m, admin: testenv.Env.Client, alice: alice, olm: olm, logf: h.t.Logf, plant: plant}, nil
}

// clearRuns deletes every ClusterObjectSet and waits until they are gone.
func clearRuns() error {
	ctx := context.Background()
	if err := testenv.Env.Client.DeleteAllOf(ctx, &olmv1.ClusterObjectSet{}); err != nil {
		return err
	}
	var listErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, deleteBound, true, func(ctx context.Context) (bool, error) {
		list := &olmv1.ClusterObjectSetList{}
		if listErr = testenv.Env.Client.List(ctx, list); listErr != nil {
			return false, nil //nolint:nilerr // a list that failed says nothing yet: poll again (kept for the timeout message)
		}
		return len(list.Items) == 0, nil
	})
	if err != nil && listErr != nil {
		return fmt.Errorf("%w (the last list failed: %w)", err, listErr)
	}
	return err
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envUint(name string, def uint64) uint64 {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}

// TestAdversarial runs one seeded sequence (make test: the fixed seed; make soak: any seed, steps or
// duration) or replays a printed one. A failure prints the seed and the shortest sequence found that
// still fails, replayable on its own with COS_ADV_REPLAY.
func TestAdversarial(t *testing.T) {
	h := newHarness(t)
	if err := testenv.Env.WaitForGarbageCollector(context.Background()); err != nil {
		t.Fatalf("warming up the garbage collector: %v", err)
	}
	seed := envUint("COS_ADV_SEED", defaultSeed)
	r, err := h.newRunner()
	if err != nil {
		t.Fatal(err)
	}
	if replay := os.Getenv("COS_ADV_REPLAY"); replay != "" {
		var ops []Op
		if err := json.Unmarshal([]byte(replay), &ops); err != nil {
			t.Fatalf("COS_ADV_REPLAY: %v", err)
		}
		err = r.replay(ops)
	} else {
		var deadline time.Time
		if d := envDuration("COS_ADV_DURATION", 0); d > 0 {
			deadline = time.Now().Add(d)
		}
		t.Logf("seed %d, run %s", seed, r.m.run)
		err = r.runGenerated(seed, int(envUint("COS_ADV_STEPS", 36)), deadline)
	}
	if err == nil {
		t.Logf("%d steps, every invariant held (heap in use peaked at %d MiB, the resident set at %d MiB)", len(r.done), h.heapPeak()>>20, h.rssPeakBytes()>>20)
		return
	}
	var v *violation
	if !errors.As(err, &v) {
		t.Fatalf("seed %d: the run could not go on (not an invariant): %v", seed, err)
	}
	ops := r.done
	t.Errorf("seed %d: %v\nsequence (%d steps): COS_ADV_REPLAY='%s'", seed, err, len(ops), mustJSON(ops))
	shortest, why := shrink(h, ops, v.kind, envDuration("COS_ADV_SHRINK", 4*time.Minute))
	t.Errorf("shortest failing sequence found (%d steps): %v\nCOS_ADV_REPLAY='%s'", len(shortest), why, mustJSON(shortest))
}

func mustJSON(ops []Op) string {
	b, _ := json.Marshal(ops)
	return string(b)
}

// shrink removes chunks of ops from a failing sequence (halves first, then smaller, down to single
// ops; never the last, failing one), keeping each removal after which a replay (with names of its
// own) still violates the same invariant (kind), until budget is spent. It returns the shortest
// sequence and its violation.
func shrink(h *harness, ops []Op, kind string, budget time.Duration) ([]Op, error) {
	deadline := time.Now().Add(budget)
	why := errors.New("not shrunk")
	for size := max(1, (len(ops)-1)/2); time.Now().Before(deadline); size = max(1, size/2) {
		for start := 0; start+size <= len(ops)-1 && time.Now().Before(deadline); {
			candidate := append(append([]Op{}, ops[:start]...), ops[start+size:]...)
			r, err := h.newRunner()
			if err != nil {
				return ops, why
			}
			err = r.replay(candidate)
			if v := (*violation)(nil); errors.As(err, &v) && v.kind == kind {
				ops, why = r.done, err
				h.t.Logf("shrunk to %d steps", len(ops))
				continue
			}
			start += size
		}
		if size == 1 {
			break
		}
	}
	return ops, why
}
