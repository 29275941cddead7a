package server

import (
	"context"
	"net/http"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Hook wraps a webhook's handler with what each of its requests needs to know of its call: its
// call's deadline (withCallDeadline, counted on clk, the clock the work admitted is counted on;
// CallDeadline), whether its caller has gone as distinct from the replica stopping (callerGone:
// stopping ends when the manager stops), and the drain of a stopping replica (drain; nil: none).
// Finishing, inside the handler, turns the first two into the handler's context.
func Hook(stopping context.Context, clk clock.PassiveClock, drain *Drain, h http.Handler) http.Handler {
	return drain.Wrap(withCallDeadline(clk, callerGone(stopping, h)))
}

// inFlightTimeout bounds a request's work once it no longer ends with the manager: the API server's
// longest webhook timeout.
const inFlightTimeout = 30 * time.Second

// Finishing runs h on a context that the manager's stop does not cancel. controller-runtime gives
// every request the manager's context, so a replica stopping (a rolling update, a drain) used to fail
// the requests it was serving ("writing object-data Secret ...: context canceled") although its
// server waits for them; now they finish, within inFlightTimeout. A request whose HTTP caller has
// gone (callerGone), or whose call's deadline has passed (withCallDeadline: the API server gives up
// then), is canceled, so that it stops its work before it writes and gives back what it holds. The
// request must have come through Hook for either.
func Finishing(h admission.Handler) admission.Handler { return finishing{h} }

type finishing struct{ admission.Handler }

func (f finishing) Handle(ctx context.Context, req admission.Request) admission.Response {
	gone := callerGoneContext(ctx)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inFlightTimeout)
	defer cancel()
	if d, ok := callDeadlineFrom(ctx); ok && d.told {
		// The API server gives up on the call then: nothing done later would be used.
		var cancelAt context.CancelFunc
		ctx, cancelAt = context.WithDeadlineCause(ctx, d.stop, errCallDeadline)
		defer cancelAt()
	}
	if gone != nil {
		// A caller that has gone cancels the work (and its writes), the manager's stop does not.
		var cancelCause context.CancelCauseFunc
		ctx, cancelCause = context.WithCancelCause(ctx)
		defer cancelCause(nil)
		defer context.AfterFunc(gone, func() { cancelCause(context.Cause(gone)) })()
	}
	return f.Handler.Handle(ctx, req)
}
