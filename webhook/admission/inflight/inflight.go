// Package inflight bounds the admission requests the webhooks serve at once, in flight: the memory
// each holds (a Budget of the admission pool, content.Pool), the work each is charged
// (deadline.Queue, by the API server's deadline for its call), and the mutating webhook's writes of
// Secrets by the same deadline. It decides and answers with refusals in the pipeline's vocabulary
// (admission.Refusal); the webhook turns them into its responses and metrics. It has no client and
// reads nothing from a context: the call's deadline is given.
package inflight

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/deadline"
)

// DefaultMaxBytes is the default total of memory the admission requests served at once may hold
// (--max-concurrent-admission-bytes): with the reconciler's 256 MiB (--max-concurrent-resolved-bytes)
// and what the manager holds besides (its cache and the content of resolved Secrets, about 150 MiB at
// 1,000 ClusterObjectSets), 664 MiB of live heap under the Go runtime's soft limit of 0.9 GiB for a
// container limit of 1 GiB (docs/webhook.md, Concurrent admissions).
const DefaultMaxBytes = 256 << 20

// DefaultMargin is the time kept free before each call's deadline (--admission-deadline-margin).
const DefaultMargin = deadline.DefaultMargin

// DefaultWait is how long an admission request waits for room before it is refused
// (--admission-wait).
const DefaultWait = 2 * time.Second

// MaxWait bounds --admission-wait: below the validating webhook's timeout (10 s), so that a request
// without room is always refused by us, quickly and retryably, never timed out by the API server.
const MaxWait = 10 * time.Second

// WorkMinSample is the least charge whose time until planned measures the rate of the work: below
// it, the request's reads from the API server (whether its name exists) weigh more than its decoding
// and planning (a bundle of 2.5 MB of random letters is charged about 8 MiB and planned in 40 ms of
// a core). It is also the most that is not refused for delaying others (deadline.Options.MinSample).
const WorkMinSample = 8 << 20

// DefaultWriteRate is the rate at which the API server is assumed to store the Secrets the webhook
// writes, all writes together, before any is measured: bytes of Secret data a second.
const DefaultWriteRate = 10e6

// Control bounds the admission requests served at once: their memory, and their work.
//
// Memory: each request is charged what decoding it keeps, estimated from its bytes before they are
// decoded (content.EstimateHeap), taken whole from Pool in one wait of at most Wait while it holds
// nothing; the Secrets it reads and the stored refs an update resolves draw from the same request's
// Budget (admission.Pipeline.Budget). No room: a quick, retryable refusal (429).
//
// Work: the same charge is the request's work (the CPU time of decoding, hashing and compressing
// follows it), admitted only when Work estimates that it, and the requests admitted before it, finish
// before the API server's deadline for their call less a margin. Else: a quick, retryable refusal
// (429) too, rather than a timeout after the cores the others needed were spent.
type Control struct {
	// Pool is shared by the mutating and the validating webhook; nil: unbounded.
	Pool *content.Pool
	// Wait is how long a request waits for room; 0: it takes room free at once or is refused.
	Wait time.Duration
	// Work is shared by the mutating and the validating webhook; nil: unbounded.
	Work *deadline.Queue
	// Writes bound the mutating webhook's writes of Secrets the same way, once a request has planned
	// them: each is its plan's stored bytes, all writes sharing the API server (Cores 1); a write
	// that would not be done before the call's deadline less the margin is not made, and the request
	// is refused with 429 (Charge.Writes). nil: unbounded.
	Writes *deadline.Queue
	// Clock is Work's, on which the calls' deadlines are counted; nil: the real clock.
	Clock clock.PassiveClock
}

// Now is the time on c's clock.
func (c Control) Now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

// Gauges show the work admitted at once; nil ones show nothing.
type Gauges struct {
	// Rate is the estimated rate on all cores, Backlog the work left of the requests in flight, in
	// bytes of charge.
	Rate, Backlog prometheus.Gauge
}

// Cost is what a request is charged before it is decoded: for each of the object and the old
// object, its bytes (the request keeps them) and the heap its decoded form keeps; plus once more the
// object's bytes for what is made from them (the canonical JSON and gzip of a plan, the patch). A
// document that is not JSON is the caller's error, told.
func Cost(object, oldObject []byte) (int64, error) {
	var cost int64
	for i, raw := range [][]byte{object, oldObject} {
		if len(raw) == 0 {
			continue
		}
		est, err := content.EstimateHeap(raw)
		if err != nil {
			what := "the ClusterObjectSet"
			if i == 1 {
				what = "the stored ClusterObjectSet"
			}
			return 0, fmt.Errorf("decoding %s: %w", what, err)
		}
		cost += int64(len(raw)) + est
	}
	return cost + int64(len(object)), nil
}

// Admit charges a request before it is decoded: its call's deadline is callDeadline, on c's clock.
// It returns the request's charge, whose Budget the request's pipeline draws from; the caller
// releases it when the request ends. A refusal needs no release.
func (c Control) Admit(ctx context.Context, callDeadline time.Time, maxResolvedBytes int64, g Gauges, object, oldObject []byte) (*Charge, *admission.Refusal) {
	cost, err := Cost(object, oldObject)
	if err != nil {
		return nil, &admission.Refusal{Reason: admission.ReasonBadRequest, Code: http.StatusBadRequest, Err: err}
	}
	b := c.Pool.NewBudget(maxResolvedBytes)
	if c.Pool != nil {
		if cost > c.Pool.Capacity() {
			return nil, &admission.Refusal{Reason: admission.ReasonTooLarge, Code: http.StatusRequestEntityTooLarge, Err: fmt.Errorf(
				"decoding this ClusterObjectSet takes an estimated %d MiB, more than the %d MiB the webhook admits at once (--max-concurrent-admission-bytes)",
				mib(cost), mib(c.Pool.Capacity()))}
		}
		wctx, cancel := context.WithTimeout(ctx, c.Wait)
		defer cancel()
		if err := b.Reserve(wctx, cost); err != nil {
			return nil, c.Busy(needs(cost))
		}
		if err := b.Hold(cost); err != nil {
			// Cannot happen: Hold draws from what Reserve took.
			b.Release()
			return nil, c.Busy(needs(cost))
		}
	}
	// After the wait for room: the time it took is the call's no more.
	ticket, d := c.Work.Admit(cost, callDeadline)
	c.observe(g)
	if !d.Admitted {
		b.Release()
		return nil, &admission.Refusal{Reason: admission.ReasonDeadline, Code: http.StatusTooManyRequests, Err: tooLate(c.Work, cost, d)}
	}
	return &Charge{Budget: b, work: ticket, deadline: callDeadline, control: c, gauges: g}, nil
}

// Busy is the quick, retryable refusal of a request that found no room in the pool (429, reason
// busy); why says for what.
func (c Control) Busy(why string) *admission.Refusal {
	return &admission.Refusal{Reason: admission.ReasonBusy, Code: http.StatusTooManyRequests, Err: fmt.Errorf(
		"the webhook is admitting %d MiB of ClusterObjectSets at once (limit %d MiB, --max-concurrent-admission-bytes): %s; retry, nothing was written",
		mib(c.Pool.Used()), mib(c.Pool.Capacity()), why)}
}

// needs says what a request needs that it did not get.
func needs(cost int64) string {
	return fmt.Sprintf("no room for the %d MiB this one needs", mib(cost))
}

// mib is n bytes in MiB, rounded up.
func mib(n int64) int64 { return (n + 1<<20 - 1) >> 20 }

// observe sets the gauges of the work admitted.
func (c Control) observe(g Gauges) {
	if c.Work == nil {
		return
	}
	if g.Rate != nil {
		g.Rate.Set(c.Work.Rate() * float64(c.Work.Cores()))
	}
	if g.Backlog != nil {
		g.Backlog.Set(c.Work.Backlog())
	}
}

// Charge is what an admitted request holds until it ends: its room in the pool (Budget) and its
// place among the work admitted (nil when unbounded), which it leaves once its work is planned
// (Writes) or it ends; and its call's deadline, on the control's clock.
type Charge struct {
	// Budget is the request's memory: its pipeline draws from it (admission.Pipeline.Budget).
	Budget   *content.Budget
	work     *deadline.Ticket
	deadline time.Time
	control  Control
	gauges   Gauges
}

// planned ends the request's work once it has planned its Secrets, all the work it was charged for:
// its time measures the rate of the work. A nil charge does nothing.
func (c *Charge) planned() {
	if c == nil {
		return
	}
	c.work.Done(true)
	c.control.observe(c.gauges)
}

// Release gives back what the request holds; work not planned is ended unmeasured (unless it took
// longer than estimated: deadline.Ticket.Done).
func (c *Charge) Release() {
	c.Budget.Release()
	c.work.Done(false)
	c.control.observe(c.gauges)
}

// tooLate is why a request that its call's deadline leaves no time for is refused, with a
// Retry-After of the time until the work ahead should leave it room.
func tooLate(q *deadline.Queue, cost int64, d deadline.Decision) error {
	why := fmt.Sprintf("it would finish in %.1f s, where the API server's deadline for this call, less a margin, leaves %.1f s",
		d.Finish.Sub(d.Now).Seconds(), d.Latest.Sub(d.Now).Seconds())
	if d.Delays {
		why = "requests admitted before it would then miss the API server's deadline for their call"
	}
	return &lateError{retryAfter: d.RetryAfter, msg: fmt.Sprintf(
		"the webhook cannot finish this ClusterObjectSet in time: %s, with %d requests in flight (%d MiB of work left, as --max-concurrent-admission-bytes charges it) and its %d MiB, at an estimated %.0f MB/s a core on %d cores; retry, nothing was written",
		why, d.InFlight, mib(int64(d.Ahead)), mib(cost), d.Rate/1e6, q.Cores())}
}

// lateError is a request refused for want of time before its call's deadline.
type lateError struct {
	msg        string
	retryAfter time.Duration
}

func (e *lateError) Error() string { return e.msg }

// RetryAfter is when there should be room for it.
func (e *lateError) RetryAfter() time.Duration { return e.retryAfter }

// Writes returns the mutating webhook's Store for the request: its work ends where its Secrets are
// to be written (its time measures the rate of the work), and its writes are admitted by
// Control.Writes: a plan whose Secrets would not be written before the call's deadline less the
// margin is not written at all, and the request is refused with 429 (admission.ErrTooLate). A dry
// run writes nothing and is not bounded.
func (c *Charge) Writes(store admission.Store) admission.Store {
	return timedWrites{Store: store, charge: c}
}

type timedWrites struct {
	admission.Store
	charge *Charge
}

// Write writes plan's Secrets if there is time.
func (w timedWrites) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	w.charge.planned()
	writes := w.charge.control.Writes
	if dryRun || writes == nil {
		return w.Store.Write(ctx, cosName, plan, dryRun)
	}
	bytes := plan.Stats.StoredBytes
	t, d := writes.Admit(bytes, w.charge.deadline)
	if !d.Admitted {
		return 0, &TooLateError{decision: d, bytes: bytes}
	}
	n, err := w.Store.Write(ctx, cosName, plan, dryRun)
	t.Done(err == nil)
	return n, err
}

// TooLateError is a write not made for want of time before the call's deadline: it is
// admission.ErrTooLate.
type TooLateError struct {
	decision deadline.Decision
	bytes    int64
}

func (e *TooLateError) Error() string {
	d := e.decision
	why := fmt.Sprintf("they would be written in %.1f s, where the API server's deadline for this call, less a margin, leaves %.1f s",
		d.Finish.Sub(d.Now).Seconds(), d.Latest.Sub(d.Now).Seconds())
	if d.Delays {
		why = "requests admitted before it would then miss the API server's deadline for their call"
	}
	return fmt.Sprintf("the webhook cannot write the %d KiB of Secrets of this ClusterObjectSet in time: %s, with %d writes in flight (%d KiB left) at an estimated %.1f MB/s; retry, nothing was written",
		(e.bytes+1023)/1024, why, d.InFlight, (int64(d.Ahead)+1023)/1024, d.Rate/1e6)
}

func (e *TooLateError) Unwrap() error { return admission.ErrTooLate }

// RetryAfter is when there should be room for the writes.
func (e *TooLateError) RetryAfter() time.Duration { return e.decision.RetryAfter }

// RetryAfter is the Retry-After a refusal for err asks for: the time an error of this package says
// there should be room; 0 when it says none.
func RetryAfter(err error) time.Duration {
	var r interface{ RetryAfter() time.Duration }
	if errors.As(err, &r) {
		return r.RetryAfter()
	}
	return 0
}
