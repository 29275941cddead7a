package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

// deadlineConn is a net.Conn that records the read deadlines set on it and serves reads from data.
type deadlineConn struct {
	net.Conn
	mu        sync.Mutex
	deadlines []time.Time
	writeDL   []time.Time
	data      []byte
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadlines = append(c.deadlines, t)
	return nil
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDL = append(c.writeDL, t)
	return nil
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.data)
	c.data = c.data[n:]
	return n, nil
}

func (c *deadlineConn) last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadlines[len(c.deadlines)-1]
}

// TestBoundedConnDeadlines: every read deadline the HTTP server sets is capped by the request's
// bound, which starts at accept (so the handshake counts) and, after a request's body was read, at
// the next byte received; between them the deadlines apply as set.
func TestBoundedConnDeadlines(t *testing.T) {
	const bound = 30 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		do   func(c *boundedConn, raw *deadlineConn, clk *testingclock.FakePassiveClock)
		want time.Time // the connection's read deadline after it (zero: none)
	}
	set := func(t time.Time) func(*boundedConn, *deadlineConn, *testingclock.FakePassiveClock) {
		return func(c *boundedConn, _ *deadlineConn, _ *testingclock.FakePassiveClock) { _ = c.SetReadDeadline(t) }
	}
	at := func(d time.Duration, f func(*boundedConn, *deadlineConn, *testingclock.FakePassiveClock)) func(*boundedConn, *deadlineConn, *testingclock.FakePassiveClock) {
		return func(c *boundedConn, raw *deadlineConn, clk *testingclock.FakePassiveClock) {
			clk.SetTime(t0.Add(d))
			f(c, raw, clk)
		}
	}
	read := func(c *boundedConn, raw *deadlineConn, _ *testingclock.FakePassiveClock) {
		raw.mu.Lock()
		raw.data = []byte("POST")
		raw.mu.Unlock()
		_, _ = c.Read(make([]byte, 4))
	}
	done := func(c *boundedConn, _ *deadlineConn, _ *testingclock.FakePassiveClock) { c.requestRead(c.handling()) }
	handled := func(c *boundedConn, _ *deadlineConn, _ *testingclock.FakePassiveClock) { c.handling() }
	idle := func(c *boundedConn, _ *deadlineConn, _ *testingclock.FakePassiveClock) { c.idle() }
	tests := map[string][]step{
		"the handshake and the first request share the bound": {
			{set(t0.Add(bound)), t0.Add(bound)},                                 // the handshake's own bound, from accept
			{at(25*time.Second, set(t0.Add(55*time.Second))), t0.Add(bound)},    // headers after a slow handshake
			{at(26*time.Second, set(time.Time{})), t0.Add(bound)},               // "no deadline" is the bound still
			{at(27*time.Second, set(t0.Add(57*time.Second))), t0.Add(bound)},    // the whole request's
			{at(28*time.Second, set(t0.Add(time.Second))), t0.Add(time.Second)}, // an earlier one applies
		},
		"the body read ends the bound: the background read and the idle wait are not capped": {
			{at(time.Second, done), time.Time{}},
			{set(time.Time{}), time.Time{}},
			{at(2*time.Second, set(t0.Add(92*time.Second))), t0.Add(92 * time.Second)}, // idle
		},
		"the next request's first byte starts its bound, under the idle wait": {
			{at(time.Second, done), time.Time{}},
			{set(t0.Add(91 * time.Second)), t0.Add(91 * time.Second)},
			{at(80*time.Second, read), t0.Add(91 * time.Second)}, // the idle deadline is earlier
			{at(81*time.Second, set(t0.Add(200*time.Second))), t0.Add(110 * time.Second)},
			{at(100*time.Second, done), t0.Add(200 * time.Second)},
			{set(t0.Add(300 * time.Second)), t0.Add(300 * time.Second)},
			{at(250*time.Second, read), t0.Add(280 * time.Second)},
		},
		"a body the handler left unread keeps the bound until the response is written": {
			{at(time.Second, handled), t0.Add(bound)},
			{at(2*time.Second, set(time.Time{})), t0.Add(bound)}, // the server discards what is left
			{at(3*time.Second, idle), time.Time{}},
			{at(5*time.Second, read), t0.Add(35 * time.Second)},
		},
		"a pipelined request's bound outlives the end of the one before": {
			{at(time.Second, done), time.Time{}},
			{at(5*time.Second, read), t0.Add(35 * time.Second)}, // read in the background
			{at(6*time.Second, idle), t0.Add(35 * time.Second)},
			{at(7*time.Second, done), time.Time{}},
		},
		"a request ends once": {
			{at(time.Second, done), time.Time{}},
			{at(5*time.Second, read), t0.Add(35 * time.Second)},
			{at(6*time.Second, done), time.Time{}},
			{at(7*time.Second, done), time.Time{}},
			{at(8*time.Second, read), t0.Add(38 * time.Second)},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(t0)
			raw := &deadlineConn{}
			c := newBoundedConn(raw, bound, clk)
			if got := raw.last(); !got.Equal(t0.Add(bound)) {
				t.Fatalf("at accept the read deadline is %v, want the bound %v", got, t0.Add(bound))
			}
			for i, s := range steps {
				s.do(c, raw, clk)
				if got := raw.last(); !got.Equal(s.want) {
					t.Errorf("step %d: read deadline %v, want %v", i, got, s.want)
				}
			}
		})
	}
	t.Run("SetDeadline caps the read deadline only", func(t *testing.T) {
		raw := &deadlineConn{}
		c := newBoundedConn(raw, bound, testingclock.NewFakePassiveClock(t0))
		_ = c.SetDeadline(t0.Add(time.Hour))
		if diff := cmp.Diff([]time.Time{t0.Add(bound), t0.Add(bound)}, raw.deadlines); diff != "" {
			t.Errorf("read deadlines (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]time.Time{t0.Add(time.Hour)}, raw.writeDL); diff != "" {
			t.Errorf("write deadlines (-want +got):\n%s", diff)
		}
	})
}

// startBoundedServer runs a Server with the given bound and clock, whose /echo handler reports
// whether the request's bound was over once its body was read (nil: the request carried no
// boundedConn).
func startBoundedServer(t *testing.T, p *testPKI, bound time.Duration, clk *testingclock.FakePassiveClock) (string, chan served, chan *bool) {
	t.Helper()
	ended := make(chan *bool, 16)
	// HTTP/1.1 only, as the manager serves by default (--enable-http2=false): with HTTP/2 offered,
	// its own bounds apply.
	http1 := func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
	addr, seen := startServer(t, p, Options{ReadTimeout: bound, Clock: clk, TLSOpts: []func(*tls.Config){http1}}, func(s *Server) {
		s.Register("/ended", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			var over *bool
			if bc, ok := r.Context().Value(boundedConnKey{}).(*boundedConn); ok {
				bc.mu.Lock()
				over = new(bool)
				*over = bc.limit.IsZero() && bc.between
				bc.mu.Unlock()
			}
			ended <- over
			if err != nil {
				http.Error(w, "reading the body", http.StatusBadRequest)
			}
		}))
	})
	return addr, seen, ended
}

// TestServerBoundsTheHandshake: the first request's bound starts at the connection's accept, so a
// connection whose bound is over before its handshake ends gets no request read. The clock puts
// the accept a whole bound in the past; the bound is an hour, so nothing else can cut it off.
func TestServerBoundsTheHandshake(t *testing.T) {
	p := newTestPKI(t)
	const bound = time.Hour
	for name, tc := range map[string]struct {
		acceptedAgo time.Duration
		served      bool
	}{
		"within the bound":   {served: true},
		"past the bound":     {acceptedAgo: bound + time.Minute},
		"just past at start": {acceptedAgo: bound},
	} {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(time.Now().Add(-tc.acceptedAgo))
			addr, seen, _ := startBoundedServer(t, p, bound, clk)
			conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "127.0.0.1", RootCAs: p.servingCA, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
			if err == nil {
				defer func() { _ = conn.Close() }()
				_ = conn.SetDeadline(time.Now().Add(20 * time.Second)) // a guard: fail rather than hang
				_, err = fmt.Fprintf(conn, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
			}
			var resp *http.Response
			if err == nil {
				resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the server neither served nor cut the connection: %v", err)
			}
			if tc.served != (err == nil && resp.StatusCode == http.StatusOK) {
				t.Fatalf("served %v (%v, %v), want %v", !tc.served, resp, err, tc.served)
			}
			if !tc.served {
				select {
				case s := <-seen:
					t.Errorf("a handler ran: %+v", s)
				default:
				}
			}
		})
	}
}

// TestServerBoundStartsAtTheNextRequestsFirstByte: on a kept-alive connection, the bound of the
// next request starts at its first byte, whatever the idle timeout: a request whose bound (by the
// clock) is over when its first bytes arrive gets no more of its body read; one within its bound is
// served, on the same connection. The bound is an hour: only the clock can have it over.
func TestServerBoundStartsAtTheNextRequestsFirstByte(t *testing.T) {
	p := newTestPKI(t)
	const bound = time.Hour
	for name, over := range map[string]bool{"within its bound": false, "bound over at its first byte": true} {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(time.Now())
			addr, _, ended := startBoundedServer(t, p, bound, clk)
			conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "127.0.0.1", RootCAs: p.servingCA, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second)) // a guard: fail rather than hang
			br := bufio.NewReader(conn)
			if _, err := fmt.Fprintf(conn, "POST /ended HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("the first request: %v %v", resp, err)
			}
			_ = resp.Body.Close()
			if e := <-ended; e == nil || !*e {
				t.Fatalf("after the first request's body the bound is still on (%v)", e)
			}
			if over {
				clk.SetTime(time.Now().Add(-2 * bound))
			}
			// The headers and half the body; the rest only when the server is still reading.
			if _, err := fmt.Fprintf(conn, "POST /ended HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n{}"); err != nil {
				t.Fatal(err)
			}
			if !over {
				if _, err := io.WriteString(conn, "  "); err != nil {
					t.Fatal(err)
				}
			}
			resp, err = http.ReadResponse(br, nil)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the server neither served nor cut the request: %v", err)
			}
			if err == nil {
				<-ended // the handler ran
			}
			if got := err == nil && resp.StatusCode == http.StatusOK; got == over {
				t.Errorf("the second request: %v %v; want served %v", resp, err, !over)
			}
		})
	}
}

// TestRequestBoundContext: a request carries its connection's boundedConn only through
// withRequestBound's server; a handler without one is served as it is.
func TestRequestBoundContext(t *testing.T) {
	called := false
	h := withRequestBound(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://x/", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.ServeHTTP(nil, req)
	if !called {
		t.Error("the handler did not run")
	}
	if ctx := boundedConnContext(context.Background(), &net.TCPConn{}); ctx.Value(boundedConnKey{}) != nil {
		t.Error("a plain connection got a bound")
	}
}
