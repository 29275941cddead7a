// Package admission_test measures concurrent large admissions (issue 27): N clients each create a
// 2.8 MB ClusterObjectSet (the prometheus-operator CRDs, inline) at once, through a real API server
// that calls a manager process's webhooks, with the manager's default flags and a container memory
// limit of 1 GiB (MEMORY_LIMIT). It reports, per N: how many were admitted at the first try and
// with retries (a 429 is retried after its Retry-After, as client-go does), the p50 and p99 of the
// time until admitted, and the manager's peak RSS during the round. make bench runs it once; the
// figures go to docs/benchmarks/. COS_BENCH_MANAGER=path measures another manager binary.
package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/test/bench/procstat"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/e2e/local"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// memoryLimit is the container limit the manager runs under, as the Deployment sets it.
const memoryLimit = 1 << 30

// retryFor bounds how long a client retries.
const retryFor = 2 * time.Minute

// BenchmarkConcurrentAdmissions runs a round of 2, 10 and 20 clients against one manager.
func BenchmarkConcurrentAdmissions(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		env := testenv.StartFor(b)
		mgr := startManager(b, env)
		httpc, err := rest.HTTPClientFor(env.Config)
		if err != nil {
			b.Fatal(err)
		}
		url := strings.TrimSuffix(env.Config.Host, "/") + "/apis/olm.operatorframework.io/v1/clusterobjectsets"
		for _, kind := range []struct{ name, label string }{{"prometheus", "prometheus-operator CRDs"}, {"containers", "`[{},{},...]`"}} {
			body := bundleJSON(b)
			if kind.name == "containers" {
				body = containersJSON(b, len(body))
			}
			for _, n := range []int{2, 10, 20} {
				r := round(b, httpc, url, body, mgr, kind.name, n)
				b.Logf("%s, %2d clients of %.1f MB: admitted at the first try %d/%d, with retries %d/%d (%d retries, %d refused with 429); time to admitted p50 %.1f s, p99 %.1f s; first answer p50 %.1f s, p99 %.1f s; manager peak RSS %.0f MiB",
					kind.label, n, float64(len(body))/1e6, r.firstTry, n, r.admitted, n, r.retries, r.busy, r.p(r.admittedIn, 0.5), r.p(r.admittedIn, 0.99),
					r.p(r.firstAnswer, 0.5), r.p(r.firstAnswer, 0.99), r.peakRSS/(1<<20))
				b.ReportMetric(float64(r.firstTry)/float64(n), fmt.Sprintf("first-try-rate-%s-%d", kind.name, n))
				b.ReportMetric(float64(r.admitted)/float64(n), fmt.Sprintf("admitted-rate-%s-%d", kind.name, n))
				b.ReportMetric(r.p(r.admittedIn, 0.5), fmt.Sprintf("p50-s-%s-%d", kind.name, n))
				b.ReportMetric(r.p(r.admittedIn, 0.99), fmt.Sprintf("p99-s-%s-%d", kind.name, n))
				b.ReportMetric(r.peakRSS/(1<<20), fmt.Sprintf("peak-rss-MiB-%s-%d", kind.name, n))
			}
		}
		b.StartTimer()
	}
}

// result is one round's figures.
type result struct {
	firstTry, admitted, retries, busy int
	admittedIn, firstAnswer           []float64
	peakRSS                           float64
}

// p is the q-quantile of xs in seconds (nearest rank), or -1 when xs is empty.
func (r result) p(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	s := slices.Sorted(slices.Values(xs))
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// round has n clients create a ClusterObjectSet each at once and retry a 429 after its Retry-After,
// for at most retryFor.
func round(b *testing.B, httpc *http.Client, url string, body []byte, mgr *controlplane.Process, kind string, n int) result {
	b.Helper()
	resetPeak(b, mgr.PID())
	var (
		mu  sync.Mutex
		res result
		wg  sync.WaitGroup
	)
	start := make(chan struct{})
	for i := range n {
		named := bytes.Replace(body, []byte(`"name":"bench-admission"`), []byte(fmt.Sprintf(`"name":"bench-%s-%d-%d"`, kind, n, i)), 1)
		wg.Go(func() {
			<-start
			t0 := time.Now()
			for attempt := 0; time.Since(t0) < retryFor; attempt++ {
				code, retryAfter, msg := create(httpc, url, named)
				mu.Lock()
				if attempt == 0 {
					res.firstAnswer = append(res.firstAnswer, time.Since(t0).Seconds())
				}
				if code == http.StatusCreated {
					res.admitted++
					if attempt == 0 {
						res.firstTry++
					}
					res.admittedIn = append(res.admittedIn, time.Since(t0).Seconds())
					mu.Unlock()
					return
				}
				if code == http.StatusTooManyRequests {
					res.busy++
				}
				if code != http.StatusTooManyRequests && code != http.StatusGatewayTimeout && code != http.StatusInternalServerError {
					mu.Unlock()
					b.Errorf("client %d: %d %s", i, code, msg)
					return
				}
				res.retries++
				mu.Unlock()
				time.Sleep(retryAfter) // the client's backoff, as client-go's after a 429
			}
		})
	}
	close(start)
	wg.Wait()
	res.peakRSS = peakRSS(b, mgr.PID())
	return res
}

// create POSTs one ClusterObjectSet and returns the status code, the Retry-After (1 s when none) and
// the message.
func create(httpc *http.Client, url string, body []byte) (int, time.Duration, string) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body)) //nolint:noctx // the client's own timeout
	if err != nil {
		return 0, 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, time.Second, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
	wait := time.Second
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		wait = time.Duration(s) * time.Second
	}
	return resp.StatusCode, wait, string(msg)
}

// bundleJSON is the prometheus-operator CRDs as one inline ClusterObjectSet named bench-admission,
// externalized by the default policy (oversized).
func bundleJSON(b *testing.B) []byte {
	b.Helper()
	cos, err := builders.Bundle("bench-admission", "prometheus-operator-crds", "monitoring")
	if err != nil {
		b.Fatal(err)
	}
	cos.APIVersion, cos.Kind = "olm.operatorframework.io/v1", "ClusterObjectSet"
	raw, err := json.Marshal(cos)
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"name":"bench-admission"`)) {
		b.Fatal("the name is not where the rounds replace it")
	}
	return raw
}

// containersJSON is a ClusterObjectSet of about size bytes whose one object is mostly empty JSON
// objects (`"x":[{},{},...]`): the body whose decoded form keeps the most heap per byte (27 times
// its size), as a hostile or careless client would send.
func containersJSON(b *testing.B, size int) []byte {
	b.Helper()
	cm := builders.ConfigMap("default", "containers", map[string]string{"x": "MARK"})
	cos := builders.COS("bench-admission", builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		builders.WithPhase("p", builders.Inline(cm)))
	cos.APIVersion, cos.Kind = "olm.operatorframework.io/v1", "ClusterObjectSet"
	raw, err := json.Marshal(cos)
	if err != nil {
		b.Fatal(err)
	}
	n := (size - len(raw)) / 3
	return bytes.Replace(raw, []byte(`{"x":"MARK"}`), []byte("["+strings.Repeat("{},", n)+"{}]"), 1)
}

// startManager starts the manager binary with its default admission flags (webhook-only: the
// bundle's CRDs are not rolled out), under a 1 GiB limit, and installs its webhooks.
func startManager(b *testing.B, env *testenv.Environment) *controlplane.Process {
	b.Helper()
	return startManagerAt(b, env).proc
}

// benchManager is a manager process and where its webhooks answer: url, with a serving certificate
// of ca.
type benchManager struct {
	proc *controlplane.Process
	url  string
	ca   []byte
	// metrics is the URL of the manager's metrics (plain HTTP).
	metrics string
}

// startManagerAt is startManager, telling where the webhooks answer.
func startManagerAt(b *testing.B, env *testenv.Environment) benchManager {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	bin := os.Getenv("COS_BENCH_MANAGER") // another build to compare, e.g. the release before
	if bin == "" {
		var err error
		if bin, err = local.BuildManager(dir); err != nil {
			b.Fatal(err)
		}
	}
	env.EnsureNamespace(b, testenv.SystemNamespace)
	bundle, err := certs.Generate([]string{"127.0.0.1"}, 24*time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	certDir := filepath.Join(dir, "certs")
	if err := bundle.Write(certDir); err != nil {
		b.Fatal(err)
	}
	ports, err := controlplane.FreePorts(3)
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("MEMORY_LIMIT", strconv.Itoa(memoryLimit)) // inherited by the manager: GOMEMLIMIT 0.9 GiB
	proc, err := controlplane.StartProcess("manager", bin, []string{
		"--kubeconfig=" + env.Kubeconfig, "--log-level=error", "--rollout=false",
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(ports[0]), "--webhook-cert-dir=" + certDir,
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[2]), "--metrics-secure=false",
		"--system-namespace=" + testenv.SystemNamespace,
	}, env.LogPath("manager"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = proc.Stop(30 * time.Second) })
	manifests, err := controlplane.WebhookManifests()
	if err != nil {
		b.Fatal(err)
	}
	if err := controlplane.InstallWebhooks(ctx, env.Config, manifests, "https://127.0.0.1:"+strconv.Itoa(ports[0]), bundle.CA); err != nil {
		b.Fatal(err)
	}
	framework.Eventually(framework.Within(b, 3*time.Minute), b, "the webhook to answer", func(ctx context.Context) (bool, string) {
		select {
		case <-proc.Exited():
			b.Fatalf("manager exited: %v", proc.ExitError())
		default:
		}
		probe := builders.COS("webhook-probe", builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
			builders.WithPhase("config", builders.InlineConfigMaps("default", "probe", 1)...))
		if err := env.Client.Create(ctx, probe); err != nil {
			return false, err.Error()
		}
		return len(probe.Spec.Phases[0].Objects) == 1 && probe.Spec.Phases[0].Objects[0].IsRef(), "not externalized"
	})
	return benchManager{proc: proc, url: "https://127.0.0.1:" + strconv.Itoa(ports[0]), ca: bundle.CA,
		metrics: "http://127.0.0.1:" + strconv.Itoa(ports[2]) + "/metrics"}
}

// resetPeak resets the process's peak RSS (VmHWM) to its current RSS.
func resetPeak(b *testing.B, pid int) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		b.Fatalf("resetting the peak RSS: %v", err)
	}
}

// peakRSS is the process's peak RSS (VmHWM) in bytes.
func peakRSS(b *testing.B, pid int) float64 {
	mem, err := procstat.ReadMemory(pid)
	if err != nil {
		b.Fatal(err)
	}
	return mem.Peak
}
