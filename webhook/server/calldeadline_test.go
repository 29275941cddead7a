package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestCallDeadline: each call's deadline is its timeout parameter (as the API server writes it,
// time.Duration's String) after its headers arrived; a call without a usable one gets
// DefaultCallTimeout, and none gets more than inFlightTimeout.
func TestCallDeadline(t *testing.T) {
	arrived := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		query string
		want  callDeadline
	}{
		"the mutating webhook's 15 s":      {query: "?timeout=15s", want: callDeadline{at: arrived.Add(15 * time.Second), told: true}},
		"what the request had left":        {query: "?timeout=4s", want: callDeadline{at: arrived.Add(4 * time.Second), told: true}},
		"the longest the API server gives": {query: "?timeout=30s", want: callDeadline{at: arrived.Add(30 * time.Second), told: true}},
		"longer: bounded":                  {query: "?timeout=1m0s", want: callDeadline{at: arrived.Add(inFlightTimeout), told: true}},
		"none":                             {want: callDeadline{at: arrived.Add(DefaultCallTimeout)}},
		"empty":                            {query: "?timeout=", want: callDeadline{at: arrived.Add(DefaultCallTimeout)}},
		"not a duration":                   {query: "?timeout=15", want: callDeadline{at: arrived.Add(DefaultCallTimeout)}},
		"zero":                             {query: "?timeout=0s", want: callDeadline{at: arrived.Add(DefaultCallTimeout)}},
		"negative":                         {query: "?timeout=-5s", want: callDeadline{at: arrived.Add(DefaultCallTimeout)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got callDeadline
			var ok bool
			h := withCallDeadline(testingclock.NewFakePassiveClock(arrived), http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got, ok = callDeadlineFrom(r.Context())
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mutate"+tc.query, http.NoBody))
			if !ok {
				t.Fatal("no deadline in the request's context")
			}
			if d := time.Until(got.stop) - got.at.Sub(arrived); d > 0 || d < -5*time.Second {
				t.Errorf("stop %v on the real clock: not the call's timeout from now", got.stop)
			}
			got.stop = time.Time{}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(callDeadline{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestFinishingStopsAtTheCallDeadline: the work of a request stops at the deadline its call named,
// with errCallDeadline as the cause; a call that named none keeps inFlightTimeout.
func TestFinishingStopsAtTheCallDeadline(t *testing.T) {
	now := time.Now()
	tests := map[string]struct {
		deadline     callDeadline
		wantDeadline time.Time
		wantCause    error
	}{
		"named, to come":  {deadline: callDeadline{stop: now.Add(10 * time.Second), told: true}, wantDeadline: now.Add(10 * time.Second)},
		"named, passed":   {deadline: callDeadline{stop: now.Add(-time.Second), told: true}, wantDeadline: now.Add(-time.Second), wantCause: errCallDeadline},
		"not named":       {deadline: callDeadline{stop: now.Add(time.Second)}, wantDeadline: now.Add(inFlightTimeout)},
		"later than 30 s": {deadline: callDeadline{stop: now.Add(time.Hour), told: true}, wantDeadline: now.Add(inFlightTimeout)},
		// The admission clock may be a test's: the real one stops the work.
		"on a fake clock": {deadline: callDeadline{at: now.Add(-time.Hour), stop: now.Add(10 * time.Second), told: true}, wantDeadline: now.Add(10 * time.Second)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got time.Time
			var cause error
			ctx := context.WithValue(context.Background(), callDeadlineKey{}, tc.deadline)
			finishing{handlerFunc(func(ctx context.Context, _ admission.Request) admission.Response {
				got, _ = ctx.Deadline()
				cause = context.Cause(ctx)
				return admission.Allowed("")
			})}.Handle(ctx, admission.Request{})
			// inFlightTimeout is counted from when finishing ran, a moment after now.
			if d := got.Sub(tc.wantDeadline); d < 0 || d > 5*time.Second {
				t.Errorf("deadline %v, want %v", got, tc.wantDeadline)
			}
			if !errors.Is(cause, tc.wantCause) {
				t.Errorf("cause %v, want %v", cause, tc.wantCause)
			}
		})
	}
}
