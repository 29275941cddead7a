package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	cosadmission "github.com/cos-externalizer/cos-externalizer/internal/admission"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/deadline"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
)

// DefaultWriteRate is the rate at which the API server is assumed to store the Secrets the webhook
// writes, all writes together, before any is measured: bytes of Secret data a second.
const DefaultWriteRate = 10e6

// timedWrites is the mutating webhook's Store: a request's work ends where its Secrets are to be
// written (charge.planned: its time measures the rate of the work), and its writes are admitted by
// AdmissionLimits.Writes: a plan whose Secrets would not be written before the call's deadline less
// the margin is not written at all, and the request is refused with 429 (ErrTooLate). A dry run
// writes nothing and is not bounded.
type timedWrites struct {
	cosadmission.Store
	limits AdmissionLimits
}

// Write writes plan's Secrets if there is time.
func (w timedWrites) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	chargeFrom(ctx).planned()
	if dryRun || w.limits.Writes == nil {
		return w.Store.Write(ctx, cosName, plan, dryRun)
	}
	bytes := plan.Stats.StoredBytes
	t, d := w.limits.Writes.Admit(bytes, w.limits.callDeadlineOr(ctx))
	if !d.Admitted {
		return 0, &tooLateError{decision: d, bytes: bytes}
	}
	n, err := w.Store.Write(ctx, cosName, plan, dryRun)
	t.Done(err == nil)
	return n, err
}

// tooLateError is a write not made for want of time before the call's deadline.
type tooLateError struct {
	decision deadline.Decision
	bytes    int64
}

func (e *tooLateError) Error() string {
	d := e.decision
	why := fmt.Sprintf("they would be written in %.1f s, where the API server's deadline for this call, less a margin, leaves %.1f s",
		d.Finish.Sub(d.Now).Seconds(), d.Latest.Sub(d.Now).Seconds())
	if d.Delays {
		why = "requests admitted before it would then miss the API server's deadline for their call"
	}
	return fmt.Sprintf("the webhook cannot write the %d KiB of Secrets of this ClusterObjectSet in time: %s, with %d writes in flight (%d KiB left) at an estimated %.1f MB/s; retry, nothing was written",
		(e.bytes+1023)/1024, why, d.InFlight, (int64(d.Ahead)+1023)/1024, d.Rate/1e6)
}

func (e *tooLateError) Unwrap() error { return cosadmission.ErrTooLate }

// retryAfterOf is the Retry-After a refusal for err asks for: a write not made for want of time
// says when there should be room; any other, busyRetryAfter.
func retryAfterOf(err error) int32 {
	var late *tooLateError
	if errors.As(err, &late) {
		return int32(max(late.decision.RetryAfter/time.Second, 1))
	}
	return busyRetryAfter
}
