// Package deadline bounds the work the admission webhooks take on at once by what they can finish
// before the API server's deadline for each call. The API server gives every webhook call a
// deadline (the webhook's timeoutSeconds, or less when its own request has less time left) and tells
// it in the call's timeout parameter; a request whose work cannot be done by then would only time
// out, after using the cores the others needed. Queue estimates when a request would finish, from
// the work admitted ahead of it and a measured rate, and admits it only when it, and every request
// admitted before it, would still finish before its deadline less a margin; otherwise it is refused
// at once, to be retried.
//
// The model: the requests in flight share the cores (Go schedules their goroutines in turn), each
// going at most at the speed of one core, so with n requests on Cores cores each gets
// min(1, Cores/n) of a core. Work is counted in the units the caller charges (the webhook's
// memory charge: bytes and the estimated heap of their decoded form, which the CPU time of
// decoding, hashing and compressing follows). The rate, in units a request does per second on a
// core of its own, starts at Options.Rate and is measured on every request that did all its work:
// its cost over the core-share it was given while in flight. That rate includes whatever slows the
// requests: other processes on the cores, the garbage collector, the API server's answers. A request
// still in flight past its estimated finish says at once that the rate is lower, before it ends. A
// request that finds nothing in flight is admitted unless its deadline less the margin has passed:
// refusing it frees nothing, and it measures the rate again.
package deadline

import (
	"math"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	// DefaultRate is the work one core is assumed to do per second before any is measured: about a
	// quarter of what the webhook's decoding, hashing and compressing do on an idle core (its
	// benchmark), the rest left to the API server's answers and to other work on the cores.
	DefaultRate = 50e6
	// DefaultMargin is kept free before each deadline (the estimate's error, the answer's way back).
	DefaultMargin = 3 * time.Second
	// DefaultMinSample is the least cost a request must have for its rate to be measured: below it,
	// what every request costs whatever its size (a read from the API server, the review's round
	// trip) dominates. A request of at most that much is not refused for delaying the others.
	DefaultMinSample = 1 << 20
	// maxRetryAfter bounds the wait a refusal asks for.
	maxRetryAfter = 15 * time.Second
	// weight is how much a new measurement moves the rate (an exponentially weighted average of
	// the time per unit, so that a slow measurement weighs more than a fast one).
	weight = 0.25
	// maxSlowdown bounds how many times slower than the current estimate one measurement counts.
	maxSlowdown = 16
	// maxFaster and maxSlower bound the measured rate, against Options.Rate.
	maxFaster, maxSlower = 64, 1024
	// overdueFloor is the share of its cost a request in flight is taken to have left at least, until
	// it is done (one past its estimated finish has not finished).
	overdueFloor = 1.0 / 8
)

// Options configure a Queue.
type Options struct {
	// Cores is how many requests go at full speed at once: GOMAXPROCS. 0: 1.
	Cores int
	// Rate is the work one request does per second on a core of its own, before any is measured.
	// 0: DefaultRate.
	Rate float64
	// Margin is kept free before each deadline. 0: DefaultMargin; negative: none.
	Margin time.Duration
	// MinSample is the least cost measured, and the most that is not refused for delaying the
	// others. 0: DefaultMinSample.
	MinSample int64
}

func (o Options) withDefaults() Options {
	if o.Cores <= 0 {
		o.Cores = 1
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	switch {
	case o.Margin == 0:
		o.Margin = DefaultMargin
	case o.Margin < 0:
		o.Margin = 0
	}
	if o.MinSample <= 0 {
		o.MinSample = DefaultMinSample
	}
	return o
}

// Queue is the work admitted at once. It is safe for concurrent use; a nil Queue admits everything.
type Queue struct {
	clock clock.PassiveClock
	opts  Options

	mu sync.Mutex
	// inFlight are the admitted requests not yet done.
	inFlight []*Ticket
	// share is the core-share time: the seconds of a core each request in flight has had since the
	// Queue was made, advanced to at.
	share float64
	at    time.Time
	// perUnit is the measured time per unit of work on a core of one's own (1/rate).
	perUnit float64
}

// New returns an empty Queue on clk.
func New(clk clock.PassiveClock, opts Options) *Queue {
	opts = opts.withDefaults()
	return &Queue{clock: clk, opts: opts, at: clk.Now(), perUnit: 1 / opts.Rate}
}

// Ticket is an admitted request; Done ends it.
type Ticket struct {
	q        *Queue
	cost     float64
	deadline time.Time
	// share is the Queue's core-share time when it was admitted.
	share float64
}

// Decision says whether a request was admitted and what the estimate was.
type Decision struct {
	Admitted bool
	// Now is when it was decided.
	Now time.Time
	// Finish is when the request was estimated to finish; Latest is the latest its deadline allows
	// (the deadline less the margin).
	Finish, Latest time.Time
	// Delays is true when a request admitted before it would then miss its deadline, where it would
	// not have without it: the request is refused.
	Delays bool
	// InFlight and Ahead are the requests in flight and their work left, in units, before it.
	InFlight int
	Ahead    float64
	// Rate is the rate assumed: the work one request does per second on a core of its own.
	Rate float64
	// RetryAfter is how long a refused request should wait: until the work ahead of it is
	// estimated to leave it room (how much it is late), at least a second and at most 15; a second
	// when its deadline less the margin had passed already.
	RetryAfter time.Duration
}

// Admit decides a request of cost units of work that must be done by deadline. An admitted
// request's Ticket must be ended with Done.
func (q *Queue) Admit(cost int64, deadline time.Time) (*Ticket, Decision) {
	if q == nil {
		return nil, Decision{Admitted: true}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.advance()
	in := q.state(now)
	d := Decide(in, Request{Cost: float64(max(cost, 0)), Deadline: deadline})
	if !d.Admitted {
		return nil, d
	}
	t := &Ticket{q: q, cost: float64(max(cost, 0)), deadline: deadline, share: q.share}
	q.inFlight = append(q.inFlight, t)
	return t, d
}

// Done ends an admitted request. finished says that it did all the work its cost counts: its rate is
// measured. A request that ends early (refused, or its caller gone) is measured only when it took
// longer than estimated: that says the rate is lower. Done on a nil Ticket does nothing; a second
// Done neither.
func (t *Ticket) Done(finished bool) {
	if t == nil {
		return
	}
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.inFlight, t)
	if i < 0 {
		return
	}
	q.advance()
	q.inFlight = slices.Delete(q.inFlight, i, i+1)
	if t.cost < float64(q.opts.MinSample) {
		return
	}
	perUnit := (q.share - t.share) / t.cost
	if perUnit <= 0 || !finished && perUnit <= q.perUnit {
		return
	}
	q.perUnit = min(max(learn(q.perUnit, perUnit), 1/(q.opts.Rate*maxFaster)), maxSlower/q.opts.Rate)
}

// learn is the time per unit after a measurement.
func learn(current, measured float64) float64 {
	measured = min(measured, current*maxSlowdown)
	return current + weight*(measured-current)
}

// Rate is the rate the Queue assumes now: the work one request does per second on a core of its
// own, lowered by any request in flight past its estimated finish.
func (q *Queue) Rate() float64 {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.state(q.advance()).Rate
}

// Clock is the clock the Queue was made on: deadlines are times on it.
func (q *Queue) Clock() clock.PassiveClock {
	if q == nil {
		return nil
	}
	return q.clock
}

// Cores is the Options.Cores the Queue was made with.
func (q *Queue) Cores() int {
	if q == nil {
		return 0
	}
	return q.opts.Cores
}

// Backlog is the work left of the requests in flight, in units, as estimated now.
func (q *Queue) Backlog() float64 {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	in := q.state(q.advance())
	sum := 0.0
	for _, r := range in.InFlight {
		sum += r.Left
	}
	return sum
}

// advance moves the core-share time to now and returns now. q.mu is held.
func (q *Queue) advance() time.Time {
	now := q.clock.Now()
	if dt := now.Sub(q.at).Seconds(); dt > 0 {
		q.share += dt * shareOf(len(q.inFlight), q.opts.Cores)
	}
	q.at = now
	return now
}

// shareOf is the share of a core each of n requests in flight gets on cores cores.
func shareOf(n, cores int) float64 {
	if n <= 0 {
		return 0
	}
	return min(1, float64(cores)/float64(n))
}

// state is what Decide needs of the Queue at now. q.mu is held, and advance was called.
func (q *Queue) state(now time.Time) State {
	in := State{Now: now, Cores: q.opts.Cores, Margin: q.opts.Margin, Rate: 1 / q.perUnit, Negligible: float64(q.opts.MinSample)}
	// A request in flight past its estimated finish lowers the rate to what it has done at most.
	for _, t := range q.inFlight {
		if had := q.share - t.share; had > 0 && t.cost > 0 && had*in.Rate > t.cost {
			in.Rate = t.cost / had
		}
	}
	for _, t := range q.inFlight {
		left := t.cost - (q.share-t.share)*in.Rate
		in.InFlight = append(in.InFlight, Request{Cost: t.cost, Left: max(left, t.cost*overdueFloor), Deadline: t.deadline})
	}
	return in
}

// State is the queue a request finds.
type State struct {
	Now time.Time
	// Cores is how many requests go at full speed at once.
	Cores int
	// Rate is the work one request does per second on a core of its own.
	Rate float64
	// Margin is kept free before each deadline.
	Margin time.Duration
	// InFlight are the requests admitted and not yet done.
	InFlight []Request
	// Negligible is the work at or below which a request is not refused for delaying the others
	// (only for missing its own deadline): a refs-only ClusterObjectSet, an update of a label.
	Negligible float64
}

// Request is one request's work.
type Request struct {
	// Cost is its work in all; Left what is left of it (for a new request, its Cost).
	Cost, Left float64
	Deadline   time.Time
}

// Decide admits a new request when, with it, it and every request in flight that would have
// finished in time without it are estimated to finish before their deadline less the margin (a
// request of at most State.Negligible: it alone); or when nothing is in flight and its deadline less
// the margin is still to come. Estimates share the cores among the requests in flight as the model
// says (the package's comment), with no request arriving later.
func Decide(in State, req Request) Decision {
	req.Left = req.Cost
	rate := in.Rate
	if !(rate > 0) || math.IsInf(rate, 0) {
		rate = DefaultRate
	}
	cores := max(in.Cores, 1)
	with := finishTimes(in.Now, append(slices.Clone(in.InFlight), req), cores, rate)
	d := Decision{Admitted: true, Now: in.Now, Finish: with[len(in.InFlight)], Latest: req.Deadline.Add(-in.Margin), InFlight: len(in.InFlight), Rate: rate}
	for _, r := range in.InFlight {
		d.Ahead += r.Left
	}
	// over is how much the latest of the estimates is past its bound.
	var over time.Duration
	if d.Finish.After(d.Latest) {
		over = d.Finish.Sub(d.Latest)
	}
	if !d.Latest.After(in.Now) {
		// No time left at all, whatever the rate: refused even alone. Its retry is a call of its
		// own, with a deadline of its own.
		d.Admitted, d.RetryAfter = false, time.Second
		return d
	}
	if len(in.InFlight) == 0 {
		return d
	}
	if req.Cost <= in.Negligible {
		// Too small to delay the others by more than their estimates' error.
		if over > 0 {
			d.Admitted, d.RetryAfter = false, min(max(ceilSecond(over), time.Second), maxRetryAfter)
		}
		return d
	}
	without := finishTimes(in.Now, in.InFlight, cores, rate)
	for i, r := range in.InFlight {
		latest := r.Deadline.Add(-in.Margin)
		if with[i].After(latest) && !without[i].After(latest) {
			d.Delays = true
			over = max(over, with[i].Sub(latest))
		}
	}
	if over > 0 || d.Delays {
		d.Admitted = false
		d.RetryAfter = min(max(ceilSecond(over), time.Second), maxRetryAfter)
	}
	return d
}

// ceilSecond is d rounded up to a whole second.
func ceilSecond(d time.Duration) time.Duration {
	if t := d.Truncate(time.Second); t < d {
		return t + time.Second
	}
	return d
}

// finishTimes are the estimated finish times of reqs (by their Left), in their order, starting at
// now: the requests in flight share the cores, each going at rate times its share (shareOf), and as
// each finishes the others' shares grow.
func finishTimes(now time.Time, reqs []Request, cores int, rate float64) []time.Time {
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case reqs[a].Left < reqs[b].Left:
			return -1
		case reqs[a].Left > reqs[b].Left:
			return 1
		}
		return 0
	})
	out := make([]time.Time, len(reqs))
	elapsed, done := 0.0, 0.0 // seconds from now; work each remaining request has done
	for k, i := range order {
		n := len(reqs) - k
		elapsed += (max(reqs[i].Left, 0) - done) / (rate * shareOf(n, cores))
		done = max(reqs[i].Left, 0)
		out[i] = now.Add(seconds(elapsed))
	}
	return out
}

// seconds is s seconds as a Duration, saturated.
func seconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}
