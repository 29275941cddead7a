// Package scale_test measures the manager at a platform's size (docs/benchmarks/, "Scale"): 1,000
// ClusterObjectSets (200 owners, 5 revisions each, 4 Archived and 1 Active, 30 small objects a
// revision, externalized into Secrets by the webhook) on one local control plane, built once per run.
// The manager runs as a process of the binary built from this tree, as its own user, so that the
// API server's flow-control counters count its requests apart from the benchmark's. `make
// bench-scale` runs it (not make test, not make bench: 8-10 minutes); COS_SCALE_OWNERS,
// COS_SCALE_REVISIONS, COS_SCALE_OBJECTS, COS_SCALE_WINDOW, COS_SCALE_DRIFT, COS_SCALE_NOISE,
// COS_SCALE_CLIENTS, COS_SCALE_REQUESTS make it smaller, COS_SCALE_MANAGER runs another binary.
// The benchmarks report figures; none asserts a time.
package scale_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/e2e"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// restart stops the running manager (if any) and starts one with args; it returns the new manager,
// the API server's counters from between the two, the time until its webhook answered and until it
// settled (every ClusterObjectSet reconciled at least once).
func (f *fixture) restart(b *testing.B, args ...string) (m *managerProc, d delta, webhook, settle time.Duration) {
	b.Helper()
	m, d, webhook, settle, _ = f.restartProfiled(b, "", args...)
	return m, d, webhook, settle
}

// restartProfiled is restart that, with COS_SCALE_PROFILE set and a non-empty name, writes a CPU
// profile of the new manager from its start (cpu-<name>.pb.gz); cpuDone closes once it is written.
func (f *fixture) restartProfiled(b *testing.B, name string, args ...string) (m *managerProc, d delta, webhook, settle time.Duration, cpuDone <-chan struct{}) {
	b.Helper()
	if f.current != nil {
		f.current.stop()
		f.current = nil
	}
	before := f.apiCounts(b)
	m = f.start(b, args...)
	f.current = m
	if name != "" {
		cpuDone = f.startCPUProfile(b, m, "cpu-"+name+".pb.gz")
	}
	webhook = m.waitWebhook(b, f)
	settle = m.waitSettled(b, f.size.total(), m.started)
	return m, diff(before, f.apiCounts(b)), webhook, settle, cpuDone
}

// BenchmarkScaleRestart restarts the single manager on the settled fixture and counts what it writes
// until it has settled again, how long that takes, and its memory then.
func BenchmarkScaleRestart(b *testing.B) {
	f := getFixture(b)
	b.ReportMetric(f.createTime.Seconds(), "s/create")
	b.ReportMetric(f.settleTime.Seconds(), "s/first-rollout")
	for b.Loop() {
		name := strconv.Itoa(f.size.total())
		if f.memoryLimit != "" {
			// The same restart without the container limit first: what the runtime's limit changes.
			f.unlimited = true
			m, d, _, settle := f.restart(b)
			rss, heap := m.memory(b)
			b.Logf("restart without a memory limit: settled after %s, %.1f MiB RSS, %.1f MiB heap; %s; load average %s", settle.Round(time.Millisecond), rss, heap, d, loadAverage())
			b.ReportMetric(rss, "MiB-RSS-nolimit")
			b.ReportMetric(heap, "MiB-heap-nolimit")
			b.ReportMetric(settle.Seconds(), "s/settle-nolimit")
			f.unlimited = false
			name += "-limit"
		}
		m, d, webhook, settle, cpuDone := f.restartProfiled(b, name)
		b.Logf("restart: webhook answered after %s, settled after %s; %s; load average %s", webhook.Round(time.Millisecond), settle.Round(time.Millisecond), d, loadAverage())
		b.ReportMetric(d.writes(), "writes/restart")
		b.ReportMetric(d.events, "events/restart")
		b.ReportMetric(d.reads, "reads/restart")
		b.ReportMetric(settle.Seconds(), "s/settle")
		b.ReportMetric(webhook.Seconds(), "s/webhook")
		b.ReportMetric(m.cpuSeconds(b), "cpu-s/settle")
		rss, heap := m.memory(b)
		b.ReportMetric(rss, "MiB-RSS")
		b.ReportMetric(heap, "MiB-heap")
		f.writeHeapProfile(b, m, "heap-"+name+".pb.gz")
		<-cpuDone
		f.waitAllSettled(b)
	}
}

// BenchmarkScaleSteadyState counts the manager's requests over COS_SCALE_WINDOW (default 2m) with
// nothing changing: first at the default drift-check interval (10 minutes: no drift check falls in a
// window that starts at settling), then at COS_SCALE_DRIFT (default 1m), which puts about two drift
// checks of every ClusterObjectSet in the window; requests per drift check come from the second.
func BenchmarkScaleSteadyState(b *testing.B) {
	f := getFixture(b)
	window := envDuration("COS_SCALE_WINDOW", 2*time.Minute)
	drift := envDuration("COS_SCALE_DRIFT", time.Minute)
	measure := func(m *managerProc) (delta, float64) {
		// Settled already; the window starts now.
		s0, err := m.state(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		before := f.apiCounts(b)
		time.Sleep(window)
		d := diff(before, f.apiCounts(b))
		s1, err := m.state(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		return d, s1.reconciles - s0.reconciles
	}
	for b.Loop() {
		if f.current == nil {
			f.restart(b)
		}
		d, reconciles := measure(f.current)
		perMin := window.Minutes()
		b.Logf("steady, default drift interval, %s: %v reconciles; %s", window, reconciles, d)
		b.ReportMetric((d.all()-d.leases)/perMin, "req/min")
		b.ReportMetric(d.writes()/perMin, "writes/min")

		f.restart(b, "--drift-check-interval="+drift.String())
		d, reconciles = measure(f.current)
		b.Logf("steady, --drift-check-interval=%s, %s: %v reconciles; %s", drift, window, reconciles, d)
		b.ReportMetric((d.all()-d.leases)/perMin, "req/min-drift-"+drift.String())
		b.ReportMetric(d.writes()/perMin, "writes/min-drift-"+drift.String())
		b.ReportMetric(reconciles/perMin, "reconciles/min-drift-"+drift.String())
		if reconciles > 0 {
			b.ReportMetric((d.all()-d.leases)/reconciles, "req/drift-check")
		}
		// Back to the default interval for the benchmarks after this one.
		f.restart(b)
	}
}

// BenchmarkScaleFailover runs two replicas with leader election, kills the leader (SIGKILL: its
// Lease runs out before the other takes over) and counts what the new leader writes until it has
// settled.
func BenchmarkScaleFailover(b *testing.B) {
	f := getFixture(b)
	for b.Loop() {
		if f.current != nil {
			f.current.stop()
			f.current = nil
		}
		a := f.start(b, "--leader-elect")
		a.waitWebhook(b, f)
		a.waitSettled(b, f.size.total(), a.started)
		standby := f.startBeside(b, []*managerProc{a}, "--leader-elect")
		standby.waitWebhook(b, f)
		time.Sleep(settleQuiet) // the standby's caches synced; it writes nothing but its Lease reads
		if s, err := a.state(context.Background()); err != nil || s.leader != 1 {
			b.Fatalf("the first replica is not the leader (%v, %v)", s, err)
		}
		before := f.apiCounts(b)
		killed := time.Now()
		a.proc.Kill()
		f.lb.SetBackends([]string{"127.0.0.1:" + strconv.Itoa(standby.webhookPort)})
		f.current = standby
		var takeover time.Duration
		framework.Eventually(framework.Within(b, 5*time.Minute), b, "the standby to lead", func(ctx context.Context) (bool, string) {
			s, err := standby.state(ctx)
			if err != nil {
				return false, err.Error()
			}
			takeover = time.Since(killed)
			return s.leader == 1, fmt.Sprint(s)
		})
		settle := standby.waitSettled(b, f.size.total(), killed)
		d := diff(before, f.apiCounts(b))
		b.Logf("failover: the standby led %s after the kill and settled %s after it; %s", takeover.Round(time.Millisecond), settle.Round(time.Millisecond), d)
		b.ReportMetric(d.writes(), "writes/failover")
		b.ReportMetric(d.events, "events/failover")
		b.ReportMetric(d.leases, "lease-req/failover")
		b.ReportMetric(takeover.Seconds(), "s/takeover")
		b.ReportMetric(settle.Seconds(), "s/settle")
		f.waitAllSettled(b)
	}
}

// BenchmarkScaleAdmission measures admission under COS_SCALE_CLIENTS (20) concurrent clients, each
// sending COS_SCALE_REQUESTS (10) server-side dry runs of creating a ClusterObjectSet, of 20 KB (10
// ConfigMaps, externalize: always) and of 650 KB (the Argo CD install), through the webhooks of the
// running manager and then with the webhook configurations removed: the API server's own handling of
// the same requests. The ratio of the two is the figure that counts.
func BenchmarkScaleAdmission(b *testing.B) {
	f := getFixture(b)
	clients := envInt("COS_SCALE_CLIENTS", 20)
	requests := envInt("COS_SCALE_REQUESTS", 10)
	sizes := []struct {
		name string
		make func(name string) (*olmv1.ClusterObjectSet, error)
	}{
		{"20KB", func(name string) (*olmv1.ClusterObjectSet, error) {
			var objs []olmv1.ClusterObjectSetObject
			for i := range 10 {
				objs = append(objs, builders.Inline(builders.ConfigMap("default", fmt.Sprintf("cm-%d", i), map[string]string{"blob": strings.Repeat(strconv.Itoa(i), 2<<10-120)})))
			}
			return builders.COS(name, builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
				builders.WithPhase("configuration", objs...)), nil
		}},
		{"650KB", func(name string) (*olmv1.ClusterObjectSet, error) {
			return builders.Bundle(name, "argocd-install", "argocd")
		}},
	}
	run := func(build func(string) (*olmv1.ClusterObjectSet, error), tag string) (p50, p99 float64) {
		var mu sync.Mutex
		var latencies []time.Duration
		// Built once: the clients' own work per request is only encoding it.
		template, err := build("adm")
		if err != nil {
			b.Fatal(err)
		}
		err = parallel(clients, clients*requests, func(i int) error {
			cos := template.DeepCopy()
			cos.Name = fmt.Sprintf("adm-%s-%d", strings.ToLower(tag), i)
			start := time.Now()
			if err := f.env.Client.Create(context.Background(), cos, client.DryRunAll); err != nil {
				return err
			}
			took := time.Since(start)
			mu.Lock()
			latencies = append(latencies, took)
			mu.Unlock()
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		return ms(e2e.Percentile(latencies, 0.50)), ms(e2e.Percentile(latencies, 0.99))
	}
	for b.Loop() {
		if f.current == nil {
			f.restart(b)
		}
		// The webhooks called at the manager's own port, as a Service's kernel routing would: not
		// through the Balancer, a proxy in this process that the clients would compete with.
		f.installWebhooks(b, "https://127.0.0.1:"+strconv.Itoa(f.current.webhookPort))
		for _, s := range sizes {
			// One unmeasured round each, so that both sides start warm.
			run(s.make, "warm-"+s.name)
			apiserver := f.env.PIDs()["kube-apiserver"]
			hook0, handler0, calls0 := f.webhookSeconds(b)
			mgrCPU0, apiCPU0 := f.current.cpuSeconds(b), cpuSeconds(b, apiserver)
			p50, p99 := run(s.make, "hook-"+s.name)
			mgrCPU, apiCPU := f.current.cpuSeconds(b)-mgrCPU0, cpuSeconds(b, apiserver)-apiCPU0
			hook1, handler1, calls1 := f.webhookSeconds(b)
			perReq := func(v float64) float64 { return v * 1000 / float64(clients*requests) }
			if err := f.env.RemoveWebhooks(context.Background()); err != nil {
				b.Fatal(err)
			}
			run(s.make, "warm-bare-"+s.name)
			apiCPU0 = cpuSeconds(b, apiserver)
			bare50, bare99 := run(s.make, "bare-"+s.name)
			bareAPICPU := cpuSeconds(b, apiserver) - apiCPU0
			f.installWebhooks(b, "https://127.0.0.1:"+strconv.Itoa(f.current.webhookPort))
			b.Logf("admission %s, %d clients x %d: webhook p50 %.1f ms p99 %.1f ms; without p50 %.1f ms p99 %.1f ms; per request %.1f ms in our webhooks as the API server sees them, %.1f ms in their handlers",
				s.name, clients, requests, p50, p99, bare50, bare99, perReq(hook1-hook0), perReq(handler1-handler0))
			b.ReportMetric(perReq(hook1-hook0), "webhook-ms/"+s.name)
			b.ReportMetric(perReq(handler1-handler0), "handler-ms/"+s.name)
			b.ReportMetric((calls1-calls0)/float64(clients*requests), "webhook-calls/"+s.name)
			b.ReportMetric(perReq(mgrCPU), "manager-cpu-ms/"+s.name)
			b.ReportMetric(perReq(apiCPU), "apiserver-cpu-ms/"+s.name)
			b.ReportMetric(perReq(bareAPICPU), "apiserver-cpu-ms-bare/"+s.name)
			b.ReportMetric(p50, "p50-ms/"+s.name)
			b.ReportMetric(p99, "p99-ms/"+s.name)
			b.ReportMetric(bare50, "p50-ms-bare/"+s.name)
			b.ReportMetric(bare99, "p99-ms-bare/"+s.name)
			b.ReportMetric(p50/bare50, "ratio-p50/"+s.name)
			b.ReportMetric(p99/bare99, "ratio-p99/"+s.name)
		}
		f.installWebhooks(b, "https://"+f.lb.Addr())
	}
}

// webhookSeconds is the time the API server spent calling our webhooks (its own histogram, every
// webhook of ours), the time their handlers took (the manager's histogram) and the API server's
// calls of our webhooks, so far.
func (f *fixture) webhookSeconds(b *testing.B) (apiserver, handlers, calls float64) {
	b.Helper()
	raw, err := f.env.APIServerMetrics(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	text, err := f.current.metricsText(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return sum(raw, "apiserver_admission_webhook_admission_duration_seconds_sum{", "cos-externalizer.io"),
		sum(text, "cos_externalizer_admission_duration_seconds_sum{"),
		sum(raw, "apiserver_admission_webhook_admission_duration_seconds_count{", "cos-externalizer.io")
}

// installWebhooks (re)installs the webhook configurations pointing at url and waits until the running
// manager answers through them.
func (f *fixture) installWebhooks(b *testing.B, url string) {
	b.Helper()
	manifests, err := controlplane.WebhookManifests()
	if err != nil {
		b.Fatal(err)
	}
	if err := controlplane.InstallWebhooks(context.Background(), f.env.Config, manifests, url, f.ca); err != nil {
		b.Fatal(err)
	}
	f.current.waitWebhook(b, f)
}

// BenchmarkScaleNoise compares the manager's memory at the fixture's size without and with
// COS_SCALE_NOISE (10,000) unrelated ConfigMaps (in the managed namespaces) and as many unrelated
// Secrets (half in the system namespace), none labelled: none may be cached. It runs last, as the
// objects stay.
func BenchmarkScaleNoise(b *testing.B) {
	f := getFixture(b)
	n := envInt("COS_SCALE_NOISE", 10000)
	for b.Loop() {
		m, _, _, _ := f.restart(b)
		time.Sleep(settleQuiet)
		rss0, heap0 := m.memory(b)
		start := time.Now()
		if err := f.createNoise(context.Background(), n); err != nil {
			b.Fatal(err)
		}
		b.Logf("created %d ConfigMaps and %d Secrets in %s", n, n, time.Since(start).Round(time.Second))
		m, d, _, settle := f.restart(b)
		time.Sleep(settleQuiet)
		rss1, heap1 := m.memory(b)
		b.Logf("with noise: settled after %s; %s", settle.Round(time.Millisecond), d)
		b.ReportMetric(rss0, "MiB-RSS")
		b.ReportMetric(heap0, "MiB-heap")
		b.ReportMetric(rss1, "MiB-RSS-noise")
		b.ReportMetric(heap1, "MiB-heap-noise")
		b.ReportMetric(rss1/rss0, "ratio-RSS")
		b.ReportMetric(settle.Seconds(), "s/settle-noise")
	}
}
