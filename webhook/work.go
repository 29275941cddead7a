package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cosadmission "github.com/cos-externalizer/cos-externalizer/internal/admission"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/deadline"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
)

// The work of the admission requests served at once, bounded by the API server's deadlines for
// their calls (InFlight.Work and Writes, issue 37): what a request holds of it (charge), the
// mutating webhook's writes (timedWrites) and the refusals for want of time.

// charge is what an admitted request holds until it ends: its room in the pool (Budget, nil when
// unbounded) and its place among the work admitted (nil when unbounded), which it leaves once its
// work is planned (timedWrites) or it ends; and its call's deadline, on the limits' clock.
type charge struct {
	Budget   *content.Budget
	work     *deadline.Ticket
	deadline time.Time
	limits   InFlight
	metrics  *Metrics
}

// planned ends the request's work once it has planned its Secrets, all the work it was charged for:
// its time measures the rate of the work. A nil charge does nothing.
func (c *charge) planned() {
	if c == nil {
		return
	}
	c.work.Done(true)
	c.limits.observe(c.metrics)
}

// release gives back what the request holds; work not planned is ended unmeasured (unless it took
// longer than estimated: deadline.Ticket.Done).
func (c *charge) release() {
	c.Budget.Release()
	c.work.Done(false)
	c.limits.observe(c.metrics)
}

// callDeadlineOr is the deadline of ctx's call on l's clock, or defaultCallTimeout from now.
func (l InFlight) callDeadlineOr(ctx context.Context) time.Time {
	if call, ok := callDeadlineFrom(ctx); ok {
		return call.at
	}
	return l.clock().Now().Add(defaultCallTimeout)
}

// observe sets the gauges of the work admitted.
func (l InFlight) observe(m *Metrics) {
	if m == nil || l.Work == nil {
		return
	}
	m.WorkRate.Set(l.Work.Rate() * float64(l.Work.Cores()))
	m.WorkBacklog.Set(l.Work.Backlog())
}

// tooLate is the quick, retryable refusal of a request that its call's deadline leaves no time for:
// 429 TooManyRequests, with a Retry-After of the time until the work ahead should leave it room.
func tooLate(q *deadline.Queue, cost int64, d deadline.Decision) admission.Response {
	why := fmt.Sprintf("it would finish in %.1f s, where the API server's deadline for this call, less a margin, leaves %.1f s",
		d.Finish.Sub(d.Now).Seconds(), d.Latest.Sub(d.Now).Seconds())
	if d.Delays {
		why = "requests admitted before it would then miss the API server's deadline for their call"
	}
	msg := fmt.Sprintf("the webhook cannot finish this ClusterObjectSet in time: %s, with %d requests in flight (%d MiB of work left, as --max-concurrent-admission-bytes charges it) and its %d MiB, at an estimated %.0f MB/s a core on %d cores; retry, nothing was written",
		why, d.InFlight, mib(int64(d.Ahead)), mib(cost), d.Rate/1e6, q.Cores())
	resp := tooManyRequests(msg)
	resp.Result.Details.RetryAfterSeconds = int32(max(d.RetryAfter/time.Second, 1))
	return resp
}

// WorkMinSample is the least charge whose time until planned measures the rate of the work: below
// it, the request's reads from the API server (whether its name exists) weigh more than its decoding
// and planning (a bundle of 2.5 MB of random letters is charged about 8 MiB and planned in 40 ms of
// a core). It is also the most that is not refused for delaying others (deadline.Options.MinSample).
const WorkMinSample = 8 << 20

// DefaultWriteRate is the rate at which the API server is assumed to store the Secrets the webhook
// writes, all writes together, before any is measured: bytes of Secret data a second.
const DefaultWriteRate = 10e6

// timedWrites is the mutating webhook's Store: a request's work ends where its Secrets are to be
// written (charge.planned: its time measures the rate of the work), and its writes are admitted by
// InFlight.Writes: a plan whose Secrets would not be written before the call's deadline less
// the margin is not written at all, and the request is refused with 429 (ErrTooLate). A dry run
// writes nothing and is not bounded.
type timedWrites struct {
	cosadmission.Store
	charge *charge
}

// Write writes plan's Secrets if there is time.
func (w timedWrites) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	w.charge.planned()
	writes := w.charge.limits.Writes
	if dryRun || writes == nil {
		return w.Store.Write(ctx, cosName, plan, dryRun)
	}
	bytes := plan.Stats.StoredBytes
	t, d := writes.Admit(bytes, w.charge.deadline)
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
