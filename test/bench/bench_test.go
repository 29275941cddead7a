// Package bench_test measures the reconciler on fresh local control planes: rollout wall time of the
// Argo CD bundle against kubectl apply plus kubectl wait, the manager's memory with 10,000 unrelated
// Secrets in the cluster, and reconcile CPU for 100 settled ClusterObjectSets. Each benchmark runs
// once (make bench uses -benchtime=1x); the figures go to docs/benchmarks/.
package bench_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/bench/procstat"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

func kubectl(b *testing.B, env *testenv.Environment, args ...string) {
	b.Helper()
	if out, errOut, err := env.Kubectl(b, nil, args...); err != nil {
		b.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
}

// BenchmarkArgoCDRollout compares the wall time from submitting the Argo CD install until every
// Deployment and StatefulSet is ready: as a ClusterObjectSet rolled out by the reconciler (phase by
// phase, each waiting for readiness), and as `kubectl apply -f` followed by `kubectl wait`.
func BenchmarkArgoCDRollout(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		var cosTime, kubectlTime time.Duration
		{
			env := testenv.StartFor(b)
			env.EnsureNamespace(b, "argocd")
			mgr, err := env.StartManager(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			// A running manager, as in a cluster: its caches synced and its controller started.
			warm := builders.COS("warm-up", builders.WithPhase("configuration", builders.InlineConfigMaps("default", "warm-up", 1)...))
			if err := env.Client.Create(context.Background(), warm); err != nil {
				b.Fatal(err)
			}
			env.WaitForCondition(b, warm.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
			cos, err := builders.Bundle("argocd", "argocd-install", "argocd")
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := env.Client.Create(context.Background(), cos); err != nil {
				b.Fatal(err)
			}
			env.WaitForCondition(b, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
			cosTime = time.Since(start)
			_ = mgr.Stop()
			_ = env.Stop()
		}
		{
			env := testenv.StartFor(b)
			env.EnsureNamespace(b, "argocd")
			dir, err := builders.BundleDir("argocd-install")
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			kubectl(b, env, "apply", "--server-side", "-n", "argocd", "-f", filepath.Join(dir, "install.yaml"))
			kubectl(b, env, "wait", "-n", "argocd", "--for=condition=Available", "deployment", "--all", "--timeout=5m")
			kubectl(b, env, "rollout", "status", "-n", "argocd", "statefulset/argocd-application-controller", "--timeout=5m")
			kubectlTime = time.Since(start)
			_ = env.Stop()
		}
		b.ReportMetric(cosTime.Seconds(), "cos-s")
		b.ReportMetric(kubectlTime.Seconds(), "kubectl-s")
		b.ReportMetric(cosTime.Seconds()/kubectlTime.Seconds(), "ratio")
		b.StartTimer()
	}
}

// managerProcess runs the manager binary against env as a separate process, so that its memory
// and CPU can be read from /proc.
type managerProcess struct {
	cmd        *exec.Cmd
	metricsURL string
}

var (
	buildOnce  sync.Once
	managerBin string
	buildDir   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func startManagerProcess(b *testing.B, env *testenv.Environment) *managerProcess {
	b.Helper()
	buildOnce.Do(func() {
		root, err := controlplane.RepoRoot()
		if err != nil {
			b.Fatal(err)
		}
		if buildDir, err = os.MkdirTemp("", "cos-bench-"); err != nil {
			b.Fatal(err)
		}
		managerBin = filepath.Join(buildDir, "cos-externalizer")
		cmd := exec.Command("go", "build", "-o", managerBin, "./cmd/cos-externalizer")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("building the manager: %v\n%s", err, out)
		}
	})
	ports, err := controlplane.FreePorts(2)
	if err != nil {
		b.Fatal(err)
	}
	m := &managerProcess{metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])}
	m.cmd = exec.Command(managerBin, "--kubeconfig="+env.Kubeconfig, "--enable-webhooks=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]), "--metrics-secure=false", fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", ports[1]),
		"--log-level=error")
	m.cmd.Stdout, m.cmd.Stderr = io.Discard, os.Stderr
	if err := m.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.stop() })
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
	framework.Eventually(context.Background(), b, "the manager to be ready", func(context.Context) (bool, string) {
		resp, err := http.Get(ready) //nolint:noctx // loopback
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return m
}

func (m *managerProcess) stop() {
	if m.cmd.Process != nil && m.cmd.ProcessState == nil {
		_ = m.cmd.Process.Signal(os.Interrupt)
		_ = m.cmd.Wait()
	}
}

// rssBytes is the resident set size of the process.
func (m *managerProcess) rssBytes(b *testing.B) float64 {
	mem, err := procstat.ReadMemory(m.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return mem.RSS
}

// cpuSeconds is the user plus system CPU time of the process so far.
func (m *managerProcess) cpuSeconds(b *testing.B) float64 {
	cpu, err := procstat.ReadCPUSeconds(m.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// metric sums the samples of a metric whose line starts with prefix.
func (m *managerProcess) metric(b *testing.B, prefix string) float64 {
	resp, err := http.Get(m.metricsURL) //nolint:noctx // loopback
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	sum, err := testenv.SumMetric(resp.Body, prefix)
	if err != nil {
		b.Fatal(err)
	}
	return sum
}

// BenchmarkManagerMemory compares the manager's RSS on a cluster with a few ClusterObjectSets,
// without and with 10,000 unrelated 1 KiB Secrets (half of them in the system namespace, unlabelled).
func BenchmarkManagerMemory(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		env := testenv.StartFor(b)
		env.EnsureNamespace(b, olmv1.DefaultSystemNamespace)
		env.EnsureNamespace(b, "noise")
		for i := range 5 {
			cos := builders.COS(fmt.Sprintf("mem-%d", i), builders.WithPhase("configuration", builders.InlineConfigMaps("default", fmt.Sprintf("mem-%d", i), 3)...))
			if err := env.Client.Create(context.Background(), cos); err != nil {
				b.Fatal(err)
			}
		}
		measure := func() float64 {
			m := startManagerProcess(b, env)
			for i := range 5 {
				env.WaitForCondition(b, fmt.Sprintf("mem-%d", i), olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
			}
			time.Sleep(3 * time.Second) // let the heap settle after the initial sync
			rss := m.rssBytes(b)
			m.stop()
			return rss
		}
		without := measure()
		createNoise(b, env, 10000)
		with := measure()
		b.ReportMetric(without/(1<<20), "rss-MiB-without")
		b.ReportMetric(with/(1<<20), "rss-MiB-with-10k-secrets")
		b.ReportMetric(with/without, "ratio")
		b.StartTimer()
	}
}

func createNoise(b *testing.B, env *testenv.Environment, n int) {
	b.Helper()
	blob := []byte(strings.Repeat("x", 1024))
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		ns := "noise"
		if i%2 == 0 {
			ns = olmv1.DefaultSystemNamespace
		}
		g.Go(func() error {
			return env.Client.Create(context.Background(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("noise-%d", i)},
				Data:       map[string][]byte{"blob": blob},
			})
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSettledReconcile measures the CPU a manager spends reconciling 100 ClusterObjectSets
// that are already rolled out: a fresh manager process reconciles each of them once at start-up.
// The CPU of starting a manager with nothing to do is subtracted.
func BenchmarkSettledReconcile(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		env := testenv.StartFor(b)
		env.EnsureNamespace(b, olmv1.DefaultSystemNamespace)
		idle := startManagerProcess(b, env)
		time.Sleep(5 * time.Second)
		baseline := idle.cpuSeconds(b)
		idle.stop()

		const n = 100
		for i := range n {
			cos := builders.COS(fmt.Sprintf("settled-%d", i), builders.WithPhase("configuration", builders.InlineConfigMaps("default", fmt.Sprintf("settled-%d", i), 3)...))
			if err := env.Client.Create(context.Background(), cos); err != nil {
				b.Fatal(err)
			}
		}
		first := startManagerProcess(b, env)
		for i := range n {
			env.WaitForCondition(b, fmt.Sprintf("settled-%d", i), olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
		}
		first.stop()

		m := startManagerProcess(b, env)
		framework.Eventually(context.Background(), b, "the settled ClusterObjectSets to be reconciled", func(context.Context) (bool, string) {
			got := m.metric(b, `controller_runtime_reconcile_total{controller="clusterobjectset"`)
			return got >= n, fmt.Sprintf("%v reconciles", got)
		})
		time.Sleep(5 * time.Second)
		cpu := m.cpuSeconds(b) - baseline
		reconcileSum := m.metric(b, `controller_runtime_reconcile_time_seconds_sum{controller="clusterobjectset"`)
		reconciles := m.metric(b, `controller_runtime_reconcile_total{controller="clusterobjectset"`)
		b.ReportMetric(cpu*1000/n, "cpu-ms/settled-cos")
		b.ReportMetric(reconcileSum*1000/reconciles, "ms/reconcile")
		b.ReportMetric(reconciles, "reconciles")

		// API requests of settled reconciles: the manager has applied everything once since it started;
		// a label on every ClusterObjectSet makes it reconcile each once more, with nothing to do.
		requests0 := m.metric(b, "rest_client_requests_total")
		for i := range n {
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"bench-touch":"1"}}}`))
			if err := env.Client.Patch(context.Background(), &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("settled-%d", i)}}, patch); err != nil {
				b.Fatal(err)
			}
		}
		framework.Eventually(context.Background(), b, "the touched ClusterObjectSets to be reconciled", func(context.Context) (bool, string) {
			got := m.metric(b, `controller_runtime_reconcile_total{controller="clusterobjectset"`)
			return got >= reconciles+n, fmt.Sprintf("%v reconciles", got)
		})
		touched := m.metric(b, `controller_runtime_reconcile_total{controller="clusterobjectset"`) - reconciles
		b.ReportMetric((m.metric(b, "rest_client_requests_total")-requests0)/touched, "api-requests/settled-reconcile")
		b.StartTimer()
	}
}
