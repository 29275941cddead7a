// Package plugin_test measures kubectl cos apply against kubectl apply --server-side through the
// webhook, on a fresh local control plane (make bench; figures in docs/benchmarks/).
package plugin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// pluginPairs is how many paired runs BenchmarkPluginApply makes per bundle.
const pluginPairs = 10

// BenchmarkPluginApply compares, on one fresh control plane with the manager's webhooks (and
// --rollout=false, so no rollout competes for the two cores), the wall time of `kubectl cos apply
// --server-side -f FILE` (externalizing on the client) with `kubectl apply --server-side -f FILE`
// through the webhook, for the Argo CD (650 KB) and prometheus-operator (2.8 MB) bundles. Each pair
// applies the same inline ClusterObjectSet, as JSON, under fresh names, alternating which goes first;
// both are processes started the same way. Both ClusterObjectSets, and their Secrets, are deleted
// before the next pair. It reports the medians and their ratio (target for 2.8 MB: 0.5 or less).
func BenchmarkPluginApply(b *testing.B) {
	plugin := buildPlugin(b)
	kubectlBin, err := controlplane.Binary("kubectl")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		env := testenv.StartFor(b)
		mgr, err := env.StartManager(context.Background(), "--rollout=false")
		if err != nil {
			b.Fatal(err)
		}
		home := b.TempDir() // kubectl's discovery cache, fresh for this control plane
		run := func(bin string, args ...string) time.Duration {
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "HOME="+home)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			d := time.Since(start)
			if err != nil {
				b.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
			}
			return d
		}
		for _, size := range []struct{ name, bundle, namespace string }{
			{"650KB-argocd", "argocd-install", "argocd"},
			{"2.8MB-prometheus-operator", "prometheus-operator-crds", "monitoring"},
		} {
			var pluginTimes, kubectlTimes []float64
			// One unmeasured pair first: kubectl's discovery cache, the API server's first requests.
			for i := -1; i < pluginPairs; i++ {
				files := map[string]string{}
				for _, who := range []string{"plugin", "kubectl"} {
					name := fmt.Sprintf("bench-%s-%s-%d", strings.ToLower(strings.ReplaceAll(size.name, ".", "")), who, i+1)
					files[who] = writeCOS(b, name, size.bundle, size.namespace)
				}
				applyPlugin := func() float64 {
					return run(plugin, "apply", "--server-side", "-f", files["plugin"]).Seconds()
				}
				applyKubectl := func() float64 {
					return run(kubectlBin, "apply", "--server-side", "-f", files["kubectl"]).Seconds()
				}
				var p, k float64
				if i%2 == 0 {
					p, k = applyPlugin(), applyKubectl()
				} else {
					k, p = applyKubectl(), applyPlugin()
				}
				if i >= 0 {
					pluginTimes, kubectlTimes = append(pluginTimes, p), append(kubectlTimes, k)
				}
				for _, f := range files {
					env.DeleteWithSecrets(b, cosNameOf(b, f))
				}
			}
			mp, mk := median(pluginTimes), median(kubectlTimes)
			b.Logf("%s: kubectl cos apply %v, kubectl apply %v (seconds)", size.name, pluginTimes, kubectlTimes)
			b.ReportMetric(mp, size.name+"-plugin-s")
			b.ReportMetric(mk, size.name+"-kubectl-s")
			b.ReportMetric(mp/mk, size.name+"-ratio")
		}
		_ = mgr.Stop()
		_ = env.Stop()
		b.StartTimer()
	}
}

// buildPlugin builds kubectl-cos for the benchmark.
func buildPlugin(b *testing.B) string {
	b.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "kubectl-cos")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/kubectl-cos")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building kubectl-cos: %v\n%s", err, msg)
	}
	return out
}

// writeCOS writes the inline ClusterObjectSet of a test bundle as JSON, as a person would write it.
func writeCOS(b *testing.B, name, bundle, namespace string) string {
	b.Helper()
	c, err := builders.Bundle(name, bundle, namespace)
	if err != nil {
		b.Fatal(err)
	}
	return testenv.WriteJSON(b, c, name+".json")
}

func cosNameOf(b *testing.B, file string) string {
	b.Helper()
	return strings.TrimSuffix(filepath.Base(file), ".json")
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
