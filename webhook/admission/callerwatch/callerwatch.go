// Package callerwatch tells when the API server's calls to the webhook server are being refused: a
// replica that requires a client certificate (--webhook-client-ca) and has had TLS handshakes but no
// authenticated call for a window, while ClusterObjectSets were being created (so the API server was
// calling the webhooks, through some replica), most likely refuses the API server's certificate. Its
// readiness says so, which takes it out of the Service, so that the API server's calls go to the
// replicas that accept them.
//
// A replica out of the Service gets no more handshakes: once the window has passed without one, it is
// ready again and is tried again, so a refused replica is never kept out for good, and a fixed client
// CA bundle takes effect within a window. A healthy replica that gets no calls (the API server's
// pooled connections stick to another one) has no handshakes, and stays ready. Only a caller the
// handshake cannot tell apart from the API server, during a window in which the replica serves no
// authenticated call, can make a replica unready; the replica that serves the creates that the
// window needs serves an authenticated call, and stays ready, so no caller can make every replica
// unready.
package callerwatch

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultWindow is how long a replica must see handshakes and creates without an authenticated call
// before its readiness fails.
const DefaultWindow = 5 * time.Minute

// Watch records, on one process's clock, the last TLS handshake, authenticated call and
// ClusterObjectSet creation; Check judges them. The zero value is not usable: use New. Safe for
// concurrent use.
type Watch struct {
	clock  clock.PassiveClock
	window time.Duration

	mu sync.Mutex
	// started is when the watch began; the others are zero until first seen.
	started, handshake, authenticated, created time.Time
}

// New returns a Watch that judges over window (DefaultWindow when not positive) on clk (the real
// clock when nil).
func New(clk clock.PassiveClock, window time.Duration) *Watch {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if window <= 0 {
		window = DefaultWindow
	}
	return &Watch{clock: clk, window: window, started: clk.Now()}
}

// Handshake records a TLS handshake begun by any caller. The methods of a nil Watch do nothing.
func (w *Watch) Handshake() {
	if w != nil {
		w.mark(&w.handshake)
	}
}

// Authenticated records a request served whose client certificate verified.
func (w *Watch) Authenticated() {
	if w != nil {
		w.mark(&w.authenticated)
	}
}

// Created records a ClusterObjectSet created in the cluster (not one listed at start).
func (w *Watch) Created() {
	if w != nil {
		w.mark(&w.created)
	}
}

// mark sets t, a field of w, to now.
func (w *Watch) mark(t *time.Time) {
	now := w.clock.Now()
	w.mu.Lock()
	*t = now
	w.mu.Unlock()
}

// Check is nil unless, for the whole of the last window, the replica has been up, has had a
// handshake and a ClusterObjectSet created in that window, and no authenticated call in it.
func (w *Watch) Check() error {
	if w == nil {
		return nil
	}
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	within := func(t time.Time) bool { return !t.IsZero() && now.Sub(t) < w.window }
	if now.Sub(w.started) < w.window || !within(w.handshake) || !within(w.created) || within(w.authenticated) {
		return nil
	}
	last := "none since the replica started"
	if !w.authenticated.IsZero() {
		last = fmt.Sprintf("the last %s ago", now.Sub(w.authenticated).Round(time.Second))
	}
	return fmt.Errorf("no authenticated call in the last %s (%s) although ClusterObjectSets were created and callers made TLS handshakes: "+
		"this replica most likely refuses the API server's client certificate (check --webhook-client-ca against the API server's AdmissionConfiguration; docs/runbook.md#webhook-calls-refused)",
		w.window, last)
}
