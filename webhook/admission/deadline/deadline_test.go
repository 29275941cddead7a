package deadline

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(seconds(s)) }

// MB is a million units of work.
const MB = 1e6

func TestDecide(t *testing.T) {
	// 10 MB/s a core, 2 cores, a margin of 3 s: the deadline of a call of 15 s leaves 12.
	base := State{Now: t0, Cores: 2, Rate: 10 * MB, Margin: 3 * time.Second}
	with := func(reqs ...Request) State {
		s := base
		s.InFlight = reqs
		return s
	}
	req := func(cost float64, deadline float64) Request {
		return Request{Cost: cost, Left: cost, Deadline: at(deadline)}
	}
	tests := map[string]struct {
		in   State
		req  Request
		want Decision
	}{
		"alone, in time": {
			in: base, req: req(50*MB, 15),
			want: Decision{Now: t0, Admitted: true, Finish: at(5), Latest: at(12), Rate: 10 * MB},
		},
		"alone, too late: admitted all the same (refusing frees nothing)": {
			in: base, req: req(200*MB, 15),
			want: Decision{Now: t0, Admitted: true, Finish: at(20), Latest: at(12), Rate: 10 * MB},
		},
		"one in flight on two cores: each has a core": {
			in: with(req(50*MB, 15)), req: req(50*MB, 15),
			want: Decision{Now: t0, Admitted: true, Finish: at(5), Latest: at(12), InFlight: 1, Ahead: 50 * MB, Rate: 10 * MB},
		},
		"three share two cores": {
			// Each goes at 2/3 of a core: 30 MB each take 4.5 s.
			in: with(req(30*MB, 15), req(30*MB, 15)), req: req(30*MB, 15),
			want: Decision{Now: t0, Admitted: true, Finish: at(4.5), Latest: at(12), InFlight: 2, Ahead: 60 * MB, Rate: 10 * MB},
		},
		"too much ahead: refused, to retry once it has room": {
			// 4 of 60 MB: each at half a core, 12 s; with a fifth, at 2/5 of a core, 15 s: 3 s late.
			in: with(req(60*MB, 15), req(60*MB, 15), req(60*MB, 15), req(60*MB, 15)), req: req(60*MB, 15),
			want: Decision{Now: t0, Finish: at(15), Latest: at(12), InFlight: 4, Ahead: 240 * MB, Rate: 10 * MB, Delays: true, RetryAfter: 3 * time.Second},
		},
		"a small request goes first: admitted beside much work": {
			// 1 MB among 4 of 60 MB: 5 at 2/5 of a core, the small one done in 0.25 s; the others
			// finish 0.25 s later than without it, 12.25 s past their 12 s: they were late already.
			in: with(req(60*MB, 20), req(60*MB, 20), req(60*MB, 20), req(60*MB, 20)), req: req(1*MB, 15),
			want: Decision{Now: t0, Admitted: true, Finish: at(0.25), Latest: at(12), InFlight: 4, Ahead: 240 * MB, Rate: 10 * MB},
		},
		"it would make one admitted before miss its deadline": {
			// The one in flight, 100 MB due at 15 s, finishes at 10 s alone (a core of its own);
			// with 3 more of 40 MB, all at half a core, 8 s for the 40s, then the 100 alone: 60 MB
			// left at 8 s, 14 s, past its 12.
			in: with(req(100*MB, 15), req(40*MB, 30), req(40*MB, 30)), req: req(40*MB, 30),
			want: Decision{Now: t0, Finish: at(8), Latest: at(27), InFlight: 3, Ahead: 180 * MB, Rate: 10 * MB, Delays: true, RetryAfter: 2 * time.Second},
		},
		"a negligible request delays none": {
			// 2 MB beside the case above: done in 0.4 s (a half core each), it moves the 100 MB due
			// at 15 s from 12 s to 12.1 s, past its bound; but 2 MB is negligible here.
			in: func() State {
				s := with(req(100*MB, 15), req(40*MB, 30), req(40*MB, 30))
				s.Negligible = 2 * MB
				return s
			}(), req: req(2*MB, 30),
			want: Decision{Now: t0, Admitted: true, Finish: at(0.4), Latest: at(27), InFlight: 3, Ahead: 180 * MB, Rate: 10 * MB},
		},
		"the same request, not negligible, delays one": {
			in: with(req(100*MB, 15), req(40*MB, 30), req(40*MB, 30)), req: req(2*MB, 30),
			want: Decision{Now: t0, Finish: at(0.4), Latest: at(27), InFlight: 3, Ahead: 180 * MB, Rate: 10 * MB, Delays: true, RetryAfter: time.Second},
		},
		"one already late is not protected": {
			// Without the new one the 100 MB due at 12 s finishes at 10 s + more than its bound.
			in: with(req(100*MB, 12), req(40*MB, 30), req(40*MB, 30)), req: req(40*MB, 30),
			want: Decision{Now: t0, Admitted: true, Finish: at(8), Latest: at(27), InFlight: 3, Ahead: 180 * MB, Rate: 10 * MB},
		},
		"a deadline already past: refused": {
			in: with(req(1*MB, 15)), req: req(1*MB, 2),
			want: Decision{Now: t0, Finish: at(0.1), Latest: at(-1), InFlight: 1, Ahead: 1 * MB, Rate: 10 * MB, RetryAfter: time.Second},
		},
		"alone, no time left after the margin: refused": {
			in: base, req: req(1*MB, 3),
			want: Decision{Now: t0, Finish: at(0.1), Latest: at(0), Rate: 10 * MB, RetryAfter: time.Second},
		},
		"no margin": {
			in: State{Now: t0, Cores: 1, Rate: 10 * MB, InFlight: []Request{req(60*MB, 15)}}, req: req(60*MB, 12),
			want: Decision{Now: t0, Finish: at(12), Latest: at(12), Admitted: true, InFlight: 1, Ahead: 60 * MB, Rate: 10 * MB},
		},
		"no cores set: one": {
			in: State{Now: t0, Rate: 10 * MB, InFlight: []Request{req(60*MB, 15)}}, req: req(60*MB, 12),
			want: Decision{Now: t0, Finish: at(12), Latest: at(12), Admitted: true, InFlight: 1, Ahead: 60 * MB, Rate: 10 * MB},
		},
		"no rate: the default": {
			in: State{Now: t0, Cores: 1, InFlight: []Request{req(DefaultRate, 15)}}, req: req(DefaultRate, 15),
			want: Decision{Now: t0, Finish: at(2), Latest: at(15), Admitted: true, InFlight: 1, Ahead: DefaultRate, Rate: DefaultRate},
		},
		"a long overshoot asks for the longest wait": {
			in: with(req(600*MB, 1000)), req: req(600*MB, 15),
			want: Decision{Now: t0, Finish: at(60), Latest: at(12), InFlight: 1, Ahead: 600 * MB, Rate: 10 * MB, RetryAfter: maxRetryAfter},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.in, tc.req)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(closeTimes)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// closeTimes compares estimates to the microsecond (they are computed in floating point).
func closeTimes(a, b time.Time) bool {
	d := a.Sub(b)
	return d < time.Microsecond && d > -time.Microsecond
}

func TestFinishTimes(t *testing.T) {
	req := func(left float64) Request { return Request{Cost: left, Left: left} }
	tests := map[string]struct {
		reqs  []Request
		cores int
		want  []float64 // seconds from now
	}{
		"none":                           {cores: 2},
		"one, a core of its own":         {reqs: []Request{req(10)}, cores: 2, want: []float64{1}},
		"as many as cores":               {reqs: []Request{req(10), req(20)}, cores: 2, want: []float64{1, 2}},
		"one core, shared in turn":       {reqs: []Request{req(20), req(10)}, cores: 1, want: []float64{3, 2}},
		"three on two: shares grow":      {reqs: []Request{req(10), req(10), req(40)}, cores: 2, want: []float64{1.5, 1.5, 4.5}},
		"equal work ends together":       {reqs: []Request{req(10), req(10), req(10), req(10)}, cores: 2, want: []float64{2, 2, 2, 2}},
		"nothing left: done now":         {reqs: []Request{req(0), req(10)}, cores: 1, want: []float64{0, 1}},
		"negative left counts as none":   {reqs: []Request{{Left: -5}, req(10)}, cores: 1, want: []float64{0, 1}},
		"more cores than requests: 1 ea": {reqs: []Request{req(10), req(30)}, cores: 8, want: []float64{1, 3}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := finishTimes(t0, tc.reqs, tc.cores, 10)
			want := make([]time.Time, len(tc.want))
			for i, s := range tc.want {
				want[i] = at(s)
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(closeTimes)); diff != "" {
				t.Errorf("finishTimes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestQueue drives a Queue on a fake clock: the model's shares, the measured rate, a request past
// its estimate, Done.
func TestQueue(t *testing.T) {
	type step struct {
		advance time.Duration
		// admit a request of cost due in deadline from now, as ticket name; or done a ticket.
		admit    string
		cost     int64
		deadline time.Duration
		done     string
		finished bool
		// want after the step: whether the admit was admitted, the rate, the backlog.
		admitted bool
		rate     float64
		backlog  float64
	}
	opts := Options{Cores: 2, Rate: 10 * MB, Margin: 3 * time.Second}
	tests := map[string]struct {
		opts  Options
		steps []step
	}{
		"measured at the rate assumed: unchanged": {opts: opts, steps: []step{
			{admit: "a", cost: 20 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 20 * MB},
			{advance: time.Second, rate: 10 * MB, backlog: 10 * MB},
			{advance: time.Second, done: "a", finished: true, rate: 10 * MB},
		}},
		"slower than assumed: the rate falls by a quarter of the difference": {opts: opts, steps: []step{
			// 20 MB in 4 s alone: 5 MB/s, 0.2 s/MB against 0.1: 0.125 s/MB, 8 MB/s.
			{admit: "a", cost: 20 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 20 * MB},
			{advance: 4 * time.Second, done: "a", finished: true, rate: 8 * MB},
		}},
		"past its estimate: the rate falls at once, before it ends": {opts: opts, steps: []step{
			// 20 MB, 3 s in, not done: at most 20/3 MB/s; it has at least an eighth left.
			{admit: "a", cost: 20 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 20 * MB},
			{advance: 3 * time.Second, rate: 20 * MB / 3, backlog: 2.5 * MB},
			// More of 20 MB due in 7 s (4 s after the margin): with a (2.5 MB left) on two cores at
			// 6.67 MB/s, b finishes in 3 s; with c, in 3.19 s; with d, 4 at half a core until a is
			// done (0.75 s), then 3 at 2/3 of a core: 4.69 s, past the 4 s. Refused.
			{admit: "b", cost: 20 * MB, deadline: 7 * time.Second, admitted: true, rate: 20 * MB / 3, backlog: 22.5 * MB},
			{admit: "c", cost: 20 * MB, deadline: 7 * time.Second, admitted: true, rate: 20 * MB / 3, backlog: 42.5 * MB},
			{admit: "d", cost: 20 * MB, deadline: 7 * time.Second, admitted: false, rate: 20 * MB / 3, backlog: 42.5 * MB},
			// a ends unfinished (its caller gone), 3 s of a core for 20 MB: measured at 0.15 s/MB.
			{done: "a", rate: 1 / 0.1125e-6, backlog: 40 * MB},
		}},
		"ended early and fast: not measured": {opts: opts, steps: []step{
			{admit: "a", cost: 20 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 20 * MB},
			{advance: time.Second, done: "a", rate: 10 * MB},
		}},
		"finished fast: the rate rises by a quarter": {opts: opts, steps: []step{
			// 20 MB in 1 s: 0.05 s/MB against 0.1: 0.0875, 11.43 MB/s.
			{admit: "a", cost: 20 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 20 * MB},
			{advance: time.Second, done: "a", finished: true, rate: 1 / 0.0875e-6, backlog: 0},
		}},
		"a stall counts at most 16 times slower": {opts: opts, steps: []step{
			// 2 MB in 1000 s: 500 s/MB; counted 1.6: 0.1 + 0.25 * 1.5 = 0.475 s/MB.
			{admit: "a", cost: 2 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 2 * MB},
			{advance: 1000 * time.Second, done: "a", finished: true, rate: 1 / 0.475e-6},
		}},
		"too small to measure": {opts: opts, steps: []step{
			{admit: "a", cost: 1000, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 1000},
			{advance: 10 * time.Second, rate: 100, backlog: 125},
			{done: "a", finished: true, rate: 10 * MB},
		}},
		"shares: two of them on two cores each have one": {opts: opts, steps: []step{
			{admit: "a", cost: 20 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 20 * MB},
			{admit: "b", cost: 20 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 40 * MB},
			{advance: time.Second, rate: 10 * MB, backlog: 20 * MB},
			{admit: "c", cost: 20 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 40 * MB},
			// 3 on 2 cores: 2/3 of a core each for 1.5 s: 10 MB each.
			{advance: 1500 * time.Millisecond, rate: 10 * MB, backlog: 2*2.5*MB + 10*MB},
			{done: "a", finished: true, rate: 10 * MB, backlog: 2.5*MB + 10*MB},
			{done: "a", finished: true, rate: 10 * MB, backlog: 2.5*MB + 10*MB},
		}},
		"a second Done, and a Done of a refused request, do nothing": {opts: Options{Cores: 1, Rate: 10 * MB, Margin: -1}, steps: []step{
			{admit: "a", cost: 100 * MB, deadline: 15 * time.Second, admitted: true, rate: 10 * MB, backlog: 100 * MB},
			{admit: "b", cost: 100 * MB, deadline: 15 * time.Second, admitted: false, rate: 10 * MB, backlog: 100 * MB},
			{done: "b", rate: 10 * MB, backlog: 100 * MB},
			{advance: 10 * time.Second, done: "a", finished: true, rate: 10 * MB},
			{done: "a", finished: true, rate: 10 * MB},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(t0)
			q := New(clk, tc.opts)
			tickets := map[string]*Ticket{}
			for i, s := range tc.steps {
				clk.SetTime(clk.Now().Add(s.advance))
				if s.admit != "" {
					tk, d := q.Admit(s.cost, clk.Now().Add(s.deadline))
					if d.Admitted != s.admitted || (tk != nil) != s.admitted {
						t.Fatalf("step %d: admit %s: admitted %v (ticket %v), want %v: %+v", i, s.admit, d.Admitted, tk != nil, s.admitted, d)
					}
					tickets[s.admit] = tk
				}
				if s.done != "" {
					tickets[s.done].Done(s.finished)
				}
				if got := q.Rate(); math.Abs(got-s.rate) > s.rate*1e-9 {
					t.Errorf("step %d: rate %v, want %v", i, got, s.rate)
				}
				if got := q.Backlog(); math.Abs(got-s.backlog) > 1e-3 {
					t.Errorf("step %d: backlog %v, want %v", i, got, s.backlog)
				}
			}
		})
	}
}

func TestNilQueueAdmitsEverything(t *testing.T) {
	var q *Queue
	tk, d := q.Admit(1<<40, t0)
	if !d.Admitted || tk != nil {
		t.Fatalf("nil Queue: %+v, ticket %v", d, tk)
	}
	tk.Done(true)
	if q.Rate() != 0 || q.Backlog() != 0 || q.Cores() != 0 {
		t.Error("a nil Queue has no rate, backlog or cores")
	}
}

func TestOptionsDefaults(t *testing.T) {
	got := Options{}.withDefaults()
	want := Options{Cores: 1, Rate: DefaultRate, Margin: DefaultMargin, MinSample: DefaultMinSample}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if got := (Options{Margin: -time.Second}).withDefaults().Margin; got != 0 {
		t.Errorf("negative margin: %v, want none", got)
	}
}

// BenchmarkAdmit is one decision with n requests in flight: the cost the webhook adds to each request.
func BenchmarkAdmit(b *testing.B) {
	for _, n := range []int{1, 20, 100} {
		b.Run(fmt.Sprintf("%d-in-flight", n), func(b *testing.B) {
			clk := testingclock.NewFakePassiveClock(t0)
			q := New(clk, Options{Cores: 2, Rate: 10 * MB})
			for i := range n {
				if _, d := q.Admit(int64(i+1)*MB, t0.Add(time.Hour)); !d.Admitted {
					b.Fatal("refused")
				}
			}
			for b.Loop() {
				tk, _ := q.Admit(MB, t0.Add(time.Hour))
				tk.Done(false)
			}
		})
	}
}
