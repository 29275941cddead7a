package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// The burst of issue 37, section 5: burstClients server-side applies (then as many creates) of
// about burstBytes each at once, half a bundle of burstConfigMaps ConfigMaps of random letters
// (hashing and gzip of content that does not compress), half one object of `[{},{},...]`
// (decoding), through a real API server that calls a manager process's webhooks (its default
// flags), first on idle cores, then with busyLoops shell loops keeping the cores busy. The creates
// leave out the API server's own parsing of an apply (YAML, managed fields), which the webhooks
// cannot shed. COS_BENCH_BURST_CLIENTS, COS_BENCH_BURST_LOADS (idle,busy) and
// COS_BENCH_BURST_VERBS (apply,create) narrow it; COS_BENCH_MANAGER measures another build.
const (
	burstClients    = 20
	burstBytes      = 2500 << 10
	burstConfigMaps = 25
	busyLoops       = 2
	// burstRetryFor bounds how long a client retries a retryable answer.
	burstRetryFor = 2 * time.Minute
)

// BenchmarkBurst reports, idle and with the cores busy, for applies and for creates: how the first
// attempt of each was answered (admitted, refused with 429, timed out, other) and how long that took,
// and the admitted throughput: the megabytes of every request admitted (a 429, or a timeout, retried
// as client-go and kubectl do) over the time until the last was admitted.
func BenchmarkBurst(b *testing.B) {
	clients, err := strconv.Atoi(envOr("COS_BENCH_BURST_CLIENTS", strconv.Itoa(burstClients)))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		env := testenv.StartFor(b)
		mgr := startManagerAt(b, env)
		httpc, err := rest.HTTPClientFor(env.Config)
		if err != nil {
			b.Fatal(err)
		}
		httpc.Timeout = 2 * time.Minute
		base := strings.TrimSuffix(env.Config.Host, "/") + "/apis/olm.operatorframework.io/v1/clusterobjectsets/"
		rng := rand.New(rand.NewPCG(37, 5)) //nolint:gosec // test content
		for _, load := range strings.Split(envOr("COS_BENCH_BURST_LOADS", "idle,busy"), ",") {
			stop := func() {}
			if load == "busy" {
				stop = startBusyLoops(b, env, busyLoops)
			}
			for _, verb := range strings.Split(envOr("COS_BENCH_BURST_VERBS", "apply,create"), ",") {
				round := load + "-" + verb
				bodies := burstBodies(b, rng, round, clients)
				before := scrapeManager(b, mgr.metrics)
				load1 := loadAverage(b)
				r := burst(b, httpc, base, verb, bodies)
				after := scrapeManager(b, mgr.metrics)
				b.Logf("%s cores (load %s), %d %ss of %.1f MB (%d of %d ConfigMaps of random letters, %d of `[{},{},...]`): first attempt %v, by body %v (first answers, p50/max s: %s); "+
					"admitted %d/%d after %d retries (%d answers 429, %d webhook timeouts, %d other timeouts, %d other) in %.1f s: %.2f MB/s admitted; manager: %s",
					load, load1, len(bodies), verb, float64(burstBytes)/1e6, (len(bodies)+1)/2, burstConfigMaps, len(bodies)/2, r.first, r.firstOf, r.firstTimes(),
					r.admitted, len(bodies), r.retries, r.answers["429"], r.answers["webhook timeout"], r.answers["timeout"], r.answers["other"], r.took.Seconds(), r.mbps(), after.since(before))
				for kind, msg := range r.sample {
					b.Logf("%s: a %s answer: %s", round, kind, msg)
				}
				b.ReportMetric(float64(r.first["admitted"]+r.first["429"])/float64(len(bodies)), "first-admitted-or-429-rate-"+round)
				b.ReportMetric(float64(r.first["timeout"]+r.first["webhook timeout"]), "first-timeouts-"+round)
				b.ReportMetric(r.mbps(), "admitted-MB/s-"+round)
			}
			stop()
		}
		b.StartTimer()
	}
}

// burstResult is one burst's figures.
type burstResult struct {
	result
	// first counts the first attempts by answer, answers every attempt's; firstOf the first
	// attempts by kind of body and answer.
	first, answers map[string]int
	firstOf        map[string]int
	// sample is a message of each kind of answer but admitted; firstIn the times of the first
	// answers, by kind.
	sample  map[string]string
	firstIn map[string][]float64
	bytes   int
	took    time.Duration
}

// bodyKind names the kind of body burstBodies gave the ClusterObjectSet name.
func bodyKind(name string) string {
	i, _ := strconv.Atoi(name[strings.LastIndex(name, "-")+1:])
	if i%2 == 0 {
		return "configmaps"
	}
	return "containers"
}

// firstTimes are the p50 and max of the first answers' times, by kind.
func (r burstResult) firstTimes() string {
	var parts []string
	for _, kind := range []string{"admitted", "429", "webhook timeout", "timeout", "other"} {
		if xs := r.firstIn[kind]; len(xs) > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f/%.1f", kind, r.p(xs, 0.5), r.p(xs, 1)))
		}
	}
	return strings.Join(parts, ", ")
}

func (r burstResult) mbps() float64 {
	if r.took <= 0 {
		return 0
	}
	return float64(r.bytes) / 1e6 / r.took.Seconds()
}

// burst sends every body at once (each a server-side apply of its own ClusterObjectSet), retrying an
// apply answered 429 after its Retry-After and one that timed out after a second, for at most
// burstRetryFor.
func burst(b *testing.B, httpc *http.Client, base, verb string, bodies map[string][]byte) burstResult {
	b.Helper()
	var (
		mu  sync.Mutex
		res = burstResult{first: map[string]int{}, answers: map[string]int{}, firstOf: map[string]int{}, sample: map[string]string{}, firstIn: map[string][]float64{}}
		wg  sync.WaitGroup
	)
	start := make(chan struct{})
	t0 := time.Now()
	for name, body := range bodies {
		wg.Go(func() {
			<-start
			for attempt := 0; time.Since(t0) < burstRetryFor; attempt++ {
				code, retryAfter, msg := send(httpc, verb, base, name, body)
				answer := classify(code, msg)
				mu.Lock()
				res.answers[answer]++
				if answer != "admitted" && res.sample[answer] == "" {
					res.sample[answer] = fmt.Sprintf("%s after %.1f s: %d %s", name, time.Since(t0).Seconds(), code, msg)
				}
				if attempt == 0 {
					res.first[answer]++
					res.firstOf[bodyKind(name)+" "+answer]++
					res.firstIn[answer] = append(res.firstIn[answer], time.Since(t0).Seconds())
				}
				switch answer {
				case "admitted":
					res.admitted++
					res.bytes += len(body)
					res.took = max(res.took, time.Since(t0))
					mu.Unlock()
					return
				case "other":
					mu.Unlock()
					b.Errorf("apply %s: %d %s", name, code, msg)
					return
				}
				res.retries++
				mu.Unlock()
				time.Sleep(retryAfter)
			}
		})
	}
	close(start)
	wg.Wait()
	return res
}

// classify names an answer: admitted, 429 (refused, to retry), a timeout of the call to a webhook
// ("webhook timeout": the webhook did not answer in its timeoutSeconds) or of the API server's own
// request ("timeout"), other.
func classify(code int, msg string) string {
	switch {
	case code == http.StatusOK || code == http.StatusCreated:
		return "admitted"
	case code == http.StatusTooManyRequests:
		return "429"
	case strings.Contains(msg, "failed calling webhook") && strings.Contains(msg, "deadline exceeded"):
		return "webhook timeout"
	case code == http.StatusGatewayTimeout, strings.Contains(msg, "Timeout"), strings.Contains(msg, "timeout"),
		strings.Contains(msg, "deadline exceeded"):
		return "timeout"
	}
	return "other"
}

// send sends one server-side apply (verb apply: the JSON body, as kubectl apply --server-side sends
// its YAML) or one create, and returns the status code, the Retry-After (1 s when none) and the
// message.
func send(httpc *http.Client, verb, base, name string, body []byte) (int, time.Duration, string) {
	method, url, contentType := http.MethodPatch, base+name+"?fieldManager=burst&force=true", "application/apply-patch+yaml"
	if verb == "create" {
		method, url, contentType = http.MethodPost, strings.TrimSuffix(base, "/"), "application/json"
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(body)) //nolint:noctx // the client's own timeout
	if err != nil {
		return 0, time.Second, err.Error()
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, time.Second, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
	wait := time.Second
	if s := resp.Header.Get("Retry-After"); s != "" {
		if d, err := time.ParseDuration(s + "s"); err == nil && d > 0 {
			wait = d
		}
	}
	return resp.StatusCode, wait, string(msg)
}

// burstBodies are the burst's applies by ClusterObjectSet name: half ConfigMap bundles, half
// `[{},{},...]`, each about burstBytes, with content of their own.
func burstBodies(b *testing.B, rng *rand.Rand, round string, n int) map[string][]byte {
	b.Helper()
	out := map[string][]byte{}
	for i := range n {
		name := fmt.Sprintf("burst-%s-%d", round, i)
		if i%2 == 0 {
			out[name] = configMapsJSON(b, rng, name)
			continue
		}
		body := bytes.Replace(containersJSON(b, burstBytes), []byte(`"name":"bench-admission"`), []byte(fmt.Sprintf(`"name":%q`, name)), 1)
		out[name] = body
	}
	return out
}

// configMapsJSON is an inline ClusterObjectSet of burstConfigMaps ConfigMaps whose data are random
// lower-case letters, about burstBytes in all.
func configMapsJSON(b *testing.B, rng *rand.Rand, name string) []byte {
	b.Helper()
	per := burstBytes / burstConfigMaps
	objs := make([]olmv1.ClusterObjectSetObject, burstConfigMaps)
	for i := range objs {
		data := make([]byte, per-200)
		for j := range data {
			data[j] = byte('a' + rng.IntN(26))
		}
		objs[i] = builders.Inline(builders.ConfigMap("default", fmt.Sprintf("%s-%d", name, i), map[string]string{"letters": string(data)}))
	}
	cos := builders.COS(name, builders.WithPhase("config", objs...))
	cos.APIVersion, cos.Kind = "olm.operatorframework.io/v1", "ClusterObjectSet"
	raw, err := json.Marshal(cos)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// loadAverage is the machine's load average over the last minute and five, as /proc/loadavg says.
func loadAverage(b *testing.B) string {
	b.Helper()
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw))
	return f[0] + ", " + f[1]
}

// envOr is the environment variable name, or def when it is not set.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// startBusyLoops starts n shell loops that each keep a core busy, and returns what stops them.
func startBusyLoops(b *testing.B, env *testenv.Environment, n int) func() {
	b.Helper()
	var procs []*controlplane.Process
	for i := range n {
		p, err := controlplane.StartProcess("busy loop", "sh", []string{"-c", "while :; do :; done"}, env.LogPath(fmt.Sprintf("busy-%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		procs = append(procs, p)
	}
	return func() {
		for _, p := range procs {
			p.Kill()
		}
	}
}

// managerFigures are what the manager's metrics say of a burst: its admission refusals by reason,
// and the time its mutating webhook took to answer.
type managerFigures struct {
	refusals             map[string]float64
	answered, answerSecs float64
}

// scrapeManager reads the manager's figures.
func scrapeManager(b *testing.B, url string) managerFigures {
	b.Helper()
	text, err := testenv.ScrapeMetrics(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	out := managerFigures{refusals: map[string]float64{}}
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, `cos_externalizer_admission_refusals_total{reason="`)
		if !ok {
			continue
		}
		reason, value, _ := strings.Cut(rest, `"} `)
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out.refusals[reason] = v
		}
	}
	for _, m := range []struct {
		name string
		into *float64
	}{{"cos_externalizer_admission_duration_seconds_count{", &out.answered}, {"cos_externalizer_admission_duration_seconds_sum{", &out.answerSecs}} {
		if *m.into, err = testenv.SumMetric(strings.NewReader(text), m.name, `webhook="externalize"`); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// since says what the manager did from before to f.
func (f managerFigures) since(before managerFigures) string {
	mean := 0.0
	if n := f.answered - before.answered; n > 0 {
		mean = (f.answerSecs - before.answerSecs) / n
	}
	return fmt.Sprintf("%.0f answers of the mutating webhook, %.1f s on average; refusals %s", f.answered-before.answered, mean, diffCounts(before.refusals, f.refusals))
}

// diffCounts says what grew from before to after.
func diffCounts(before, after map[string]float64) string {
	var parts []string
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
