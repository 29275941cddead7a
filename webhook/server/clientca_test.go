package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/internal/metric"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/callerwatch"
)

// errorLog is a logger that counts the errors logged, by message.
type errorLog struct {
	mu     sync.Mutex
	errors []string
}

func (l *errorLog) logger() logr.Logger {
	return funcr.New(func(_, args string) {
		if !strings.Contains(args, `"error"`) {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.errors = append(l.errors, args)
	}, funcr.Options{})
}

func (l *errorLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.errors)
}

func counter(c prometheus.Counter) float64 {
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func gauge(g prometheus.Gauge) float64 {
	m := &dto.Metric{}
	if err := g.Write(m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

// replaceFile writes data as a new file renamed over path, as the kubelet swaps a projected volume
// (a new version of the file, whatever its content).
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestClientCAReloadFailures: a file that cannot be loaded (garbage, empty, missing) keeps the last
// good bundle and is logged and counted once per version of the file, however often it is looked
// at; the failing gauge holds while it lasts, and the expiry gauge follows the bundle in use.
func TestClientCAReloadFailures(t *testing.T) {
	p := newTestPKI(t)
	now := time.Now()
	caC, err := certs.NewCA("client-ca-c", 2*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	var log errorLog
	m := NewMetrics(metric.CounterVec("cos_externalizer_admission_refusals_total", "Admission requests refused, by reason.", "reason"))
	ca, err := NewClientCA(p.caAFile, ClientCAOptions{Metrics: m, Log: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		errors, failures int
		failing          float64
		expiry           time.Time
		lastErr          bool
	}
	steps := []struct {
		name string
		do   func()
		want want
	}{
		{"loaded", func() {}, want{expiry: p.caA.Cert.NotAfter}},
		{"garbage", func() { replaceFile(t, p.caAFile, []byte("not a certificate")) }, want{1, 1, 1, p.caA.Cert.NotAfter, true}},
		{"the same garbage, looked at again", func() {}, want{1, 1, 1, p.caA.Cert.NotAfter, true}},
		{"garbage again, a new version", func() { replaceFile(t, p.caAFile, []byte("not a certificate")) }, want{2, 2, 1, p.caA.Cert.NotAfter, true}},
		{"empty", func() { replaceFile(t, p.caAFile, nil) }, want{3, 3, 1, p.caA.Cert.NotAfter, true}},
		{"missing", func() {
			if err := os.Remove(p.caAFile); err != nil {
				t.Fatal(err)
			}
		}, want{4, 4, 1, p.caA.Cert.NotAfter, true}},
		{"still missing", func() {}, want{4, 4, 1, p.caA.Cert.NotAfter, true}},
		{"the good bundle back", func() { replaceFile(t, p.caAFile, p.caA.PEM) }, want{4, 4, 0, p.caA.Cert.NotAfter, false}},
		{"another bundle, two CAs: the earliest expiry", func() {
			replaceFile(t, p.caAFile, append(append([]byte{}, caC.PEM...), p.caBFilePEM...))
		}, want{4, 4, 0, p.caB.Cert.NotAfter, false}},
	}
	for _, s := range steps {
		s.do()
		for range 3 { // handshakes, requests and polls look at the file
			_, _ = ca.current()
		}
		got := want{log.count(), int(counter(m.ClientCAReloadFailures)), gauge(m.ClientCAReloadFailing),
			time.Unix(int64(gauge(m.ClientCAExpiry)), 0), ca.LastError() != nil}
		s.want.expiry = time.Unix(s.want.expiry.Unix(), 0)
		if diff := cmp.Diff(s.want, got, cmp.AllowUnexported(want{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
	if pool, _ := ca.current(); !pool.Equal(mustPool(t, append(append([]byte{}, caC.PEM...), p.caBFilePEM...))) {
		t.Error("the bundle in use is not the last good one")
	}
}

func mustPool(t *testing.T, pem []byte) *x509.CertPool {
	t.Helper()
	pool, err := ParseClientCABundle(pem)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestClientCARunPolls: without a handshake, Run finds a broken file at its next poll (the fake
// clock's tick), and reports it once.
func TestClientCARunPolls(t *testing.T) {
	p := newTestPKI(t)
	clk := testingclock.NewFakeClock(time.Now())
	var log errorLog
	m := NewMetrics(metric.CounterVec("cos_externalizer_admission_refusals_total", "Admission requests refused, by reason.", "reason"))
	ca, err := NewClientCA(p.caAFile, ClientCAOptions{Metrics: m, Log: log.logger(), Clock: clk, PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ca.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	framework.Eventually(ctx, t, "Run waiting on its ticker", func(context.Context) (bool, string) {
		return clk.HasWaiters(), ""
	})
	replaceFile(t, p.caAFile, []byte("garbage"))
	if n := counter(m.ClientCAReloadFailures); n != 0 {
		t.Fatalf("a failure counted before the poll: %v", n)
	}
	for range 3 {
		clk.Step(time.Minute)
	}
	framework.Eventually(ctx, t, "the poll reporting the broken file", func(context.Context) (bool, string) {
		n := counter(m.ClientCAReloadFailures)
		return n == 1 && gauge(m.ClientCAReloadFailing) == 1, fmt.Sprintf("%v failures", n)
	})
	if log.count() != 1 {
		t.Errorf("%d errors logged, want 1", log.count())
	}
}

// reuseTracker records whether each request of a client went over a kept-alive connection.
type reuseTracker struct {
	mu     sync.Mutex
	reused []bool
}

func (r *reuseTracker) post(t *testing.T, c *http.Client, url string) (*http.Response, error) {
	t.Helper()
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reused = append(r.reused, i.Reused)
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, url, strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

func (r *reuseTracker) last() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reused) > 0 && r.reused[len(r.reused)-1]
}

// TestClientCASwapReachesKeptAliveConnections: a request over a kept-alive connection whose client
// certificate the current bundle no longer verifies is refused (403, counted) and its connection
// closed: the CA swapped away, or the certificate expired on the (fake) clock. The next request
// makes a new handshake, which the current bundle decides.
func TestClientCASwapReachesKeptAliveConnections(t *testing.T) {
	tests := map[string]struct {
		change func(t *testing.T, p *testPKI, clk *testingclock.FakeClock)
		// handshake: whether a new connection with client A is served after the change.
		handshake bool
	}{
		"the CA swapped for another": {change: func(t *testing.T, p *testPKI, _ *testingclock.FakeClock) {
			replaceFile(t, p.caAFile, p.caBFilePEM)
		}},
		"the client certificate expired": {change: func(_ *testing.T, _ *testPKI, clk *testingclock.FakeClock) {
			clk.Step(2 * time.Hour) // the client certificates are valid for an hour
		}},
		"a bundle that still holds the CA": {change: func(t *testing.T, p *testPKI, _ *testingclock.FakeClock) {
			replaceFile(t, p.caAFile, append(append([]byte{}, p.caA.PEM...), p.caBFilePEM...))
		}, handshake: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newTestPKI(t)
			clk := testingclock.NewFakeClock(time.Now())
			m := NewMetrics(metric.CounterVec("cos_externalizer_admission_refusals_total", "Admission requests refused, by reason.", "reason"))
			ca, err := NewClientCA(p.caAFile, ClientCAOptions{Metrics: m, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			addr, seen := startServer(t, p, Options{ClientCA: ca})
			c := p.client(&p.clientA)
			defer c.CloseIdleConnections()
			var tr reuseTracker
			url := "https://" + addr + "/echo"
			for i := range 2 {
				resp, err := tr.post(t, c, url)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d before the change: %v %v", i, resp, err)
				}
				<-seen
			}
			if !tr.last() {
				t.Fatal("the second request did not reuse the connection")
			}
			tc.change(t, p, clk)

			resp, err := tr.post(t, c, url)
			if !tr.last() {
				t.Fatal("the request after the change did not go over the kept-alive connection")
			}
			if tc.handshake {
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("the kept-alive connection, still trusted: %v %v", resp, err)
				}
				<-seen
				return
			}
			if err != nil || resp.StatusCode != http.StatusForbidden || !resp.Close {
				t.Fatalf("the kept-alive connection after the change: %v %v; want 403 closing the connection", resp, err)
			}
			select {
			case s := <-seen:
				t.Fatalf("a handler ran: %+v", s)
			default:
			}
			if n := counter(m.Refusals.WithLabelValues(string(cosadmission.ReasonClientCertificate))); n != 1 {
				t.Errorf("%v refusals with reason %s, want 1", n, string(cosadmission.ReasonClientCertificate))
			}
			// The next request makes a new handshake: client A is no longer trusted, client B is
			// when its CA is the bundle's.
			if resp, err := tr.post(t, c, url); tr.last() || err == nil {
				t.Errorf("after the refusal: reused %v, %v %v; want a new handshake, refused", tr.last(), resp, err)
			}
		})
	}
}

// TestTLSOptionVerifiesAtTheClocksTime: the handshake verifies the client certificate at the
// clock's time.
func TestTLSOptionVerifiesAtTheClocksTime(t *testing.T) {
	p := newTestPKI(t)
	for name, tc := range map[string]struct {
		shift  time.Duration
		served bool
	}{"now": {served: true}, "after the certificate's expiry": {shift: 2 * time.Hour}} {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Now().Add(tc.shift))
			ca, err := NewClientCA(p.caAFile, ClientCAOptions{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			addr, _ := startServer(t, p, Options{ClientCA: ca})
			c := p.client(&p.clientA)
			defer c.CloseIdleConnections()
			var tr reuseTracker
			_, err = tr.post(t, c, "https://"+addr+"/echo")
			if (err == nil) != tc.served {
				t.Errorf("served %v (%v), want %v", err == nil, err, tc.served)
			}
		})
	}
}

// TestClientCAFeedsTheCallerWatch: every handshake, refused or not, and every request served with a
// verified certificate reach the caller watch, so that a replica refusing every caller while sets are
// created is unready, and one call with a verified certificate makes it ready.
func TestClientCAFeedsTheCallerWatch(t *testing.T) {
	p := newTestPKI(t)
	clk := testingclock.NewFakeClock(time.Now())
	watch := callerwatch.New(clk, time.Minute)
	ca, err := NewClientCA(p.caAFile, ClientCAOptions{Clock: clk, Callers: watch})
	if err != nil {
		t.Fatal(err)
	}
	addr, seen := startServer(t, p, Options{ClientCA: ca})
	url := "https://" + addr + "/echo"
	clk.Step(time.Minute)
	watch.Created()
	if err := watch.Check(); err != nil {
		t.Fatalf("unready before any handshake: %v", err)
	}
	anonymous := p.client(nil)
	defer anonymous.CloseIdleConnections()
	if resp, err := anonymous.Post(url, "application/json", strings.NewReader("{}")); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a caller without a certificate was served: %v", resp.Status)
	}
	if err := watch.Check(); err == nil {
		t.Fatal("ready after a refused handshake while sets are created and no call authenticated")
	}
	c := p.client(&p.clientA)
	defer c.CloseIdleConnections()
	resp, err := c.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the client with a certificate: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	<-seen
	if err := watch.Check(); err != nil {
		t.Fatalf("unready after an authenticated call: %v", err)
	}
}
