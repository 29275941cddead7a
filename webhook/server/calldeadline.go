package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"k8s.io/utils/clock"
)

// The API server gives each call to a webhook a deadline: the webhook's timeoutSeconds, or what is
// left of its own request's when that is sooner. It cancels the call then, and tells the webhook in
// the call's timeout parameter, rounded up to a whole second (k8s.io/apiserver's webhook
// dispatchers, pkg/admission/plugin/webhook/{mutating,validating}/dispatcher.go, set it as the
// timeout of client-go's request, which puts it in the URL). The webhook answers by then or not at
// all: the work admitted at once is bounded by it (CallDeadline, inflight.Control) and the work of a
// request stops at it (Finishing).

// DefaultCallTimeout is the time a call that names no timeout is given (a caller other than the API
// server): the validating webhook's timeoutSeconds, the shortest of the fail-closed webhooks'.
const DefaultCallTimeout = 10 * time.Second

// errCallDeadline is the cause of a handler's context ended at its call's deadline.
var errCallDeadline = errors.New("the API server's deadline for this call has passed")

// callDeadlineKey is the context key of the call's deadline.
type callDeadlineKey struct{}

// callDeadline is when the API server gives up on a call.
type callDeadline struct {
	// at is on the clock the work admitted is counted on (inflight.Control.Clock, which tests fake);
	// stop is the same moment on the real clock, at which the work stops (Finishing).
	at, stop time.Time
	// told: the call named its timeout; else it is given DefaultCallTimeout.
	told bool
}

// withCallDeadline reads the deadline of each call from its timeout parameter, counted from when its
// headers arrived on clk (before its body is read and decoded), and gives it to the handlers in the
// request's context (callDeadlineFrom). A timeout that is missing, not a positive duration, or longer
// than inFlightTimeout (the API server's longest) counts as DefaultCallTimeout or inFlightTimeout.
func withCallDeadline(clk clock.PassiveClock, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived, arrivedReal := clk.Now(), time.Now()
		timeout, told := callTimeout(r.URL.Query().Get("timeout"))
		ctx := context.WithValue(r.Context(), callDeadlineKey{}, callDeadline{at: arrived.Add(timeout), stop: arrivedReal.Add(timeout), told: told})
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// callTimeout parses the timeout parameter of a call.
func callTimeout(param string) (time.Duration, bool) {
	d, err := time.ParseDuration(param)
	if param == "" || err != nil || d <= 0 {
		return DefaultCallTimeout, false
	}
	return min(d, inFlightTimeout), true
}

// CallDeadline returns the deadline of the call ctx serves, on the clock given to Hook, when the
// request came through Hook.
func CallDeadline(ctx context.Context) (time.Time, bool) {
	d, ok := callDeadlineFrom(ctx)
	return d.at, ok
}

// callDeadlineFrom returns the deadline of the call ctx serves, when it came through withCallDeadline.
func callDeadlineFrom(ctx context.Context) (callDeadline, bool) {
	d, ok := ctx.Value(callDeadlineKey{}).(callDeadline)
	return d, ok
}
