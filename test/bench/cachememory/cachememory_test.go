// Package cachememory_test measures the manager's memory with 1 GiB of object-data Secrets stored in
// the system namespace (issue 27, item 1): its resident set and Go heap once it has synced and
// reconciled, its peak resident set, and the Secret reads of its reconciles. `make bench-cache-memory`
// runs it; figures in docs/benchmarks/ ("Object-data Secrets and the cache").
//
// Environment: COS_CACHEMEM_SECRETS (1100) Secrets of COS_CACHEMEM_SIZE (976128 bytes: 953 KiB, 1 GiB
// in all) random bytes; COS_CACHEMEM_MANAGER=path measures that manager binary instead of one built
// from the tree; COS_CACHEMEM_BASELINE=path (or name=path,name=path) measures those binaries too,
// first, on the same fixture (the "before"), their figures suffixed with -baseline (or -name).
package cachememory_test

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/test/bench/procstat"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/e2e/local"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

const (
	// sets ClusterObjectSets reference refsEach Secrets each, every one holding one ConfigMap of
	// about the Secrets' size; the other Secrets hold random bytes that nothing references.
	sets     = 10
	refsEach = 3
	// ns is where the ConfigMaps are rolled out.
	ns = "default"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkCacheMemory stores the Secrets and the ClusterObjectSets once, then for each binary
// (COS_CACHEMEM_BASELINE's first, if given, then the tree's) starts a manager, waits until every
// ClusterObjectSet has Succeeded and the manager has settled, reads its memory, makes it reconcile
// every ClusterObjectSet once more (a label) and counts the Secret reads of those reconciles.
func BenchmarkCacheMemory(b *testing.B) {
	n, size := envInt("COS_CACHEMEM_SECRETS", 1100), envInt("COS_CACHEMEM_SIZE", 976128)
	current := os.Getenv("COS_CACHEMEM_MANAGER")
	if current == "" {
		var err error
		if current, err = local.BuildManager(b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
	env := testenv.StartFor(b)
	env.EnsureNamespace(b, testenv.SystemNamespace)
	start := time.Now()
	stored := createFixture(b, env, n, size)
	b.Logf("fixture: %d object-data Secrets, %d bytes of data (%.2f GiB), %d ClusterObjectSets of %d refs, stored in %s",
		n, stored, float64(stored)/(1<<30), sets, refsEach, time.Since(start).Round(time.Second))

	type binary struct{ name, path string }
	var binaries []binary
	// COS_CACHEMEM_BASELINE: a path, or name=path pairs separated by commas.
	for _, base := range strings.Split(os.Getenv("COS_CACHEMEM_BASELINE"), ",") {
		if base = strings.TrimSpace(base); base == "" {
			continue
		}
		name, path, ok := strings.Cut(base, "=")
		if !ok {
			name, path = "baseline", base
		}
		binaries = append(binaries, binary{"-" + name, path})
	}
	binaries = append(binaries, binary{"", current})
	for b.Loop() {
		for _, bin := range binaries {
			measure(b, env, bin.path, bin.name)
		}
	}
}

// measure runs one manager of binary bin and reports its figures, suffixed with suffix.
func measure(b *testing.B, env *testenv.Environment, bin, suffix string) {
	ports, err := controlplane.FreePorts(2)
	if err != nil {
		b.Fatal(err)
	}
	metricsURL := "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics"
	gets0 := secretGets(b, env)
	started := time.Now()
	p, err := controlplane.StartProcess("manager", bin, []string{
		"--kubeconfig=" + env.Kubeconfig, "--enable-webhooks=false", "--rollout=true", "--log-level=error",
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]), "--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--system-namespace=" + testenv.SystemNamespace,
		// Nothing references the filler Secrets: the sweep must leave them for the measurement.
		"--orphan-grace-period=24h",
	}, env.LogPath("manager"+suffix))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Stop(30 * time.Second) }()
	metric := func(ctx context.Context, prefix string, contains ...string) (float64, error) {
		select {
		case <-p.Exited():
			b.Fatalf("manager exited: %v", p.ExitError())
		default:
		}
		text, err := testenv.ScrapeMetrics(ctx, metricsURL)
		if err != nil {
			return 0, err
		}
		v, _ := testenv.SumMetric(strings.NewReader(text), prefix, contains...)
		return v, nil
	}
	reconciles := func(ctx context.Context) (float64, error) {
		return metric(ctx, `controller_runtime_reconcile_total{controller="clusterobjectset"`)
	}
	waitSucceeded(b, env)
	settled := waitSettled(b, metric, sets)
	rss, peak, heap := memory(b, p.PID(), metric)
	gets1 := secretGets(b, env)
	b.Logf("manager%s: settled %s after its start; RSS %.0f MiB, peak RSS %.0f MiB, heap %.0f MiB; %v Secret GETs until settled",
		suffix, settled.Sub(started).Round(100*time.Millisecond), rss, peak, heap, gets1-gets0)
	b.ReportMetric(rss, "MiB-RSS"+suffix)
	b.ReportMetric(peak, "MiB-peak-RSS"+suffix)
	b.ReportMetric(heap, "MiB-heap"+suffix)

	// One more reconcile of every ClusterObjectSet, with nothing to do: the Secret reads it takes.
	before, err := reconciles(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for i := range sets {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"bench-touch":"`+strconv.FormatInt(time.Now().UnixNano(), 36)+`"}}}`))
		if err := env.Client.Patch(context.Background(), &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: cosName(i)}}, patch); err != nil {
			b.Fatal(err)
		}
	}
	waitSettled(b, metric, int(before)+sets)
	after, err := reconciles(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	gets := secretGets(b, env) - gets1
	b.Logf("manager%s: %v reconciles after the label, %v Secret GETs", suffix, after-before, gets)
	b.ReportMetric(gets/(after-before), "secret-GETs/reconcile"+suffix)
}

// createFixture stores n object-data Secrets of size random bytes each (sets*refsEach of them hold a
// ConfigMap instead, referenced by the ClusterObjectSets) and the ClusterObjectSets, and returns the
// bytes of data stored.
func createFixture(b *testing.B, env *testenv.Environment, n, size int) int64 {
	ctx := context.Background()
	var g errgroup.Group
	g.SetLimit(4)
	sizes := make([]int64, n)
	refs := make([][]olmv1.ClusterObjectSetObject, sets)
	for i := range sets {
		refs[i] = make([]olmv1.ClusterObjectSetObject, refsEach)
	}
	for i := range n {
		g.Go(func() error {
			var stored []byte
			owner := fmt.Sprintf("filler-%04d", i)
			if i < sets*refsEach {
				set, j := i/refsEach, i%refsEach
				owner = cosName(set)
				// Random text of 64 letters (6 random bits a byte): about as incompressible as
				// JSON can be; 732 KB at the default size.
				raw := make([]byte, (size-200)*3/4)
				_, _ = crand.Read(raw)
				cm := builders.ConfigMap(ns, fmt.Sprintf("%s-%d", owner, j), map[string]string{"blob": encode(raw)})
				var err error
				if stored, err = content.Canonical(cm.Object); err != nil {
					return err
				}
			} else {
				stored = make([]byte, size)
				_, _ = crand.Read(stored)
			}
			key := content.Key(stored)
			data := map[string][]byte{key: stored}
			sec := secretdata.ObjectDataSecret(owner, testenv.SystemNamespace, content.SecretOut{Name: naming.SecretName(owner, data), Data: data})
			if err := env.Client.Create(ctx, sec); err != nil {
				return fmt.Errorf("creating Secret %d: %w", i, err)
			}
			sizes[i] = int64(len(stored))
			if i < sets*refsEach {
				refs[i/refsEach][i%refsEach] = builders.Ref(sec.Name, testenv.SystemNamespace, key)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	for i := range sets {
		if err := env.Client.Create(ctx, builders.COS(cosName(i), builders.WithPhase("configuration", refs[i]...))); err != nil {
			b.Fatal(err)
		}
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	return total
}

func cosName(i int) string { return fmt.Sprintf("cache-memory-%02d", i) }

// encode is text of raw: a letter of base64's alphabet for the low 6 bits of each byte.
func encode(raw []byte) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var sb strings.Builder
	sb.Grow(len(raw) * 4 / 3)
	for _, c := range raw {
		sb.WriteByte(alphabet[c&63])
	}
	return sb.String()
}

// waitSucceeded waits until every ClusterObjectSet has Succeeded at its generation.
func waitSucceeded(b *testing.B, env *testenv.Environment) {
	framework.Eventually(framework.Within(b, 20*time.Minute), b, "every ClusterObjectSet Succeeded", func(ctx context.Context) (bool, string) {
		for i := range sets {
			cos := &olmv1.ClusterObjectSet{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: cosName(i)}, cos); err != nil {
				return false, err.Error()
			}
			cond := apimeta.FindStatusCondition(cos.Status.Conditions, olmv1.ConditionSucceeded)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != cos.Generation {
				return false, cos.Name + ": " + testenv.Conditions(cos)
			}
		}
		return true, ""
	})
}

// settleQuiet is how long the reconcile count must stay unchanged, with an empty queue and no active
// worker, for the manager to count as settled (as in test/bench/scale).
const settleQuiet = 5 * time.Second

// waitSettled waits until the manager has reconciled at least n times, its queue is empty, no worker
// is busy and the count has not moved for settleQuiet; it returns when the count last changed.
func waitSettled(b *testing.B, metric func(context.Context, string, ...string) (float64, error), n int) time.Time {
	var last float64
	var lastChange time.Time
	framework.Eventually(framework.Within(b, 20*time.Minute), b, "the manager to settle", func(ctx context.Context) (bool, string) {
		count, err := metric(ctx, `controller_runtime_reconcile_total{controller="clusterobjectset"`)
		if err != nil {
			return false, err.Error()
		}
		depth, _ := metric(ctx, `workqueue_depth{`, `name="clusterobjectset"`)
		active, _ := metric(ctx, `controller_runtime_active_workers{controller="clusterobjectset"`)
		now := time.Now()
		if count != last || lastChange.IsZero() {
			last, lastChange = count, now
		}
		ok := count >= float64(n) && depth == 0 && active == 0 && now.Sub(lastChange) >= settleQuiet
		return ok, fmt.Sprintf("%v reconciles (want %d), queue %v, active %v", count, n, depth, active)
	})
	return lastChange
}

// memory reads the manager's resident set (the largest of six samples a second apart), its peak
// resident set since it started (VmHWM) and its Go heap (the smallest allocated heap of the samples:
// about the live heap after a collection), in MiB; as test/bench/scale reads them.
func memory(b *testing.B, pid int, metric func(context.Context, string, ...string) (float64, error)) (rss, peak, heap float64) {
	got, err := procstat.Sample(pid, func() (float64, error) {
		return metric(context.Background(), "go_memstats_heap_alloc_bytes")
	})
	if err != nil {
		b.Fatal(err)
	}
	return got.RSS, got.Peak, got.Heap
}

// secretGets is the API server's count of GET requests for Secrets so far (every client's: in the
// windows measured only the manager reads Secrets).
func secretGets(b *testing.B, env *testenv.Environment) float64 {
	text, err := env.APIServerMetrics(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	v, _ := testenv.SumMetric(strings.NewReader(text), "apiserver_request_total{", `verb="GET"`, `resource="secrets"`)
	return v
}
