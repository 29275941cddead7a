package deadline

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// FuzzDecide holds Decide and the model's finish times to their promises on any queue: a request
// finding nothing in flight is admitted while its deadline less the margin is to come, and none after
// it; an admitted one is estimated to finish in time, delaying none that would have (unless it is
// negligible); a refused one is told to wait one to 15 seconds; a request added never makes another
// finish sooner, and no estimate beats the cores' combined rate.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(2), uint32(10_000_000), uint16(3000), uint32(50_000_000), uint16(15_000), uint32(0), []byte{})
	f.Add(uint8(2), uint32(10_000_000), uint16(3000), uint32(60_000_000), uint16(15_000), uint32(1<<20),
		[]byte{0, 0, 0, 0x03, 0x93, 0x87, 0, 0x3a, 0x98, 0, 0, 0x03, 0x93, 0x87, 0, 0x3a, 0x98})
	f.Add(uint8(0), uint32(0), uint16(0), uint32(0), uint16(0), uint32(0), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, cores uint8, rate uint32, marginMS uint16, cost uint32, deadlineMS uint16, negligible uint32, queue []byte) {
		in := State{Now: t0, Cores: int(cores), Rate: float64(rate), Margin: time.Duration(marginMS) * time.Millisecond, Negligible: float64(negligible)}
		// Each 6 bytes of queue: the cost (4) and the deadline in ms from now (2, from -5 s).
		for len(queue) >= 6 && len(in.InFlight) < 64 {
			c := float64(binary.BigEndian.Uint32(queue))
			dl := t0.Add(time.Duration(int(binary.BigEndian.Uint16(queue[4:]))-5000) * time.Millisecond)
			in.InFlight = append(in.InFlight, Request{Cost: c, Left: c * float64(queue[0]%9) / 8, Deadline: dl})
			queue = queue[6:]
		}
		req := Request{Cost: float64(cost), Deadline: t0.Add(time.Duration(deadlineMS) * time.Millisecond)}
		d := Decide(in, req)
		const eps = time.Microsecond
		switch {
		case len(in.InFlight) == 0 && !d.Admitted && d.Latest.After(t0):
			t.Fatalf("refused with nothing in flight and time left: %+v", d)
		case d.Admitted && !d.Latest.After(t0):
			t.Fatalf("admitted with no time left: %+v", d)
		case d.Admitted && len(in.InFlight) > 0 && (d.Finish.Sub(d.Latest) > eps || d.Delays):
			t.Fatalf("admitted past its bound or delaying another: %+v", d)
		case !d.Admitted && (d.RetryAfter < time.Second || d.RetryAfter > maxRetryAfter):
			t.Fatalf("refused with a wait of %v: %+v", d.RetryAfter, d)
		case d.Admitted && d.RetryAfter != 0:
			t.Fatalf("admitted with a wait: %+v", d)
		case d.Delays && req.Cost <= in.Negligible:
			t.Fatalf("a negligible request refused for delaying others: %+v", d)
		}
		// The model's finish times, with and without the request.
		req.Left = req.Cost
		all := append(slices.Clone(in.InFlight), req)
		r := d.Rate
		with, without := finishTimes(t0, all, max(in.Cores, 1), r), finishTimes(t0, in.InFlight, max(in.Cores, 1), r)
		total, last := 0.0, t0
		for i, a := range all {
			total += max(a.Left, 0)
			if with[i].Before(t0) {
				t.Fatalf("request %d finishes before now: %v", i, with[i])
			}
			if i < len(without) && with[i].Add(eps).Before(without[i]) {
				t.Fatalf("request %d finishes sooner with one more: %v < %v", i, with[i], without[i])
			}
			for j, b := range all {
				if a.Left < b.Left && with[i].After(with[j].Add(eps)) {
					t.Fatalf("request %d (%v left) finishes after %d (%v left)", i, a.Left, j, b.Left)
				}
			}
			last = maxTime(last, with[i])
		}
		if fastest := seconds(total / (r * float64(min(len(all), max(in.Cores, 1))))); last.Sub(t0)+eps < fastest && fastest < time.Duration(1<<62) {
			t.Fatalf("all done in %v, faster than the cores' combined rate allows (%v)", last.Sub(t0), fastest)
		}
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// FuzzQueue runs a Queue through any sequence of admits, ends and clock steps: it never panics,
// its rate stays positive and finite, its backlog is never negative, and a request that finds it
// empty is admitted.
func FuzzQueue(f *testing.F) {
	f.Add(uint8(2), []byte{0, 10, 1, 0, 2, 0, 0, 3, 0, 0})
	f.Add(uint8(1), []byte{0, 255, 0, 1, 0, 2, 255, 1, 1, 0, 3, 1, 3, 0})
	f.Fuzz(func(t *testing.T, cores uint8, ops []byte) {
		clk := newStepClock()
		q := New(clk, Options{Cores: int(cores % 9), Rate: 10 * MB})
		var tickets []*Ticket
		for len(ops) >= 2 {
			op, arg := ops[0]%4, ops[1]
			ops = ops[2:]
			switch op {
			case 0: // admit arg MB due in arg/10 s
				empty := q.Backlog() == 0 && len(tickets) == 0
				// Due in arg/10 s, after the default margin of 3 s.
				tk, d := q.Admit(int64(arg)*MB, clk.Now().Add(DefaultMargin+(time.Duration(arg)+1)*100*time.Millisecond))
				if empty && !d.Admitted {
					t.Fatalf("refused by an empty queue: %+v", d)
				}
				if tk != nil {
					tickets = append(tickets, tk)
				}
			case 1, 2: // end a ticket, finished or not
				if len(tickets) > 0 {
					i := int(arg) % len(tickets)
					tickets[i].Done(op == 1)
					tickets = slices.Delete(tickets, i, i+1)
				}
			case 3: // arg tenths of a second pass
				clk.step(time.Duration(arg) * 100 * time.Millisecond)
			}
			if r := q.Rate(); !(r > 0) || r > 1e300 {
				t.Fatalf("rate %v", r)
			}
			if b := q.Backlog(); b < 0 {
				t.Fatalf("backlog %v", b)
			}
		}
	})
}

// stepClock is a fake clock moved by the fuzz target.
type stepClock struct{ *testingclock.FakePassiveClock }

func newStepClock() stepClock { return stepClock{testingclock.NewFakePassiveClock(t0)} }

func (c stepClock) step(d time.Duration) { c.SetTime(c.Now().Add(d)) }
