package servingcert

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

// timerClock is a fake clock that reports every timer started, so that a test moves the clock only
// once the loop waits.
type timerClock struct {
	*testingclock.FakeClock
	timers chan time.Duration
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.timers <- d
	return t
}

// TestLoop runs loop for a simulated hour with syncs that ask for a time past, for nothing, for a
// time soon or fail, with and without a change arriving whenever the loop waits, and checks the
// time between syncs.
func TestLoop(t *testing.T) {
	fail := errors.New("the API server is away")
	exactly := func(d time.Duration) func(int) (time.Duration, time.Duration) {
		return func(int) (time.Duration, time.Duration) { return d, d }
	}
	backoff := func(i int) (time.Duration, time.Duration) {
		d := min(minSyncInterval<<min(i, 6), maxRetryDelay)
		return d, d + time.Duration(float64(d)*retryJitter)
	}
	tests := map[string]struct {
		next func(now time.Time) (time.Time, error)
		// poke sends a change whenever the loop starts waiting after a step of the clock.
		poke bool
		// gap is the range of the time between sync i and i+1.
		gap func(i int) (lo, hi time.Duration)
	}{
		"asks for a time past":           {next: func(now time.Time) (time.Time, error) { return now.Add(-time.Hour), nil }, gap: exactly(minSyncInterval)},
		"asks for now":                   {next: func(now time.Time) (time.Time, error) { return now, nil }, gap: exactly(minSyncInterval)},
		"asks for nothing":               {next: func(time.Time) (time.Time, error) { return time.Time{}, nil }, gap: exactly(resyncInterval)},
		"asks for in 5s":                 {next: func(now time.Time) (time.Time, error) { return now.Add(5 * time.Second), nil }, gap: exactly(5 * time.Second)},
		"asks for in an hour":            {next: func(now time.Time) (time.Time, error) { return now.Add(time.Hour), nil }, gap: exactly(resyncInterval)},
		"a change whenever it waits":     {next: func(time.Time) (time.Time, error) { return time.Time{}, nil }, poke: true, gap: exactly(minSyncInterval)},
		"fails every time":               {next: func(time.Time) (time.Time, error) { return time.Time{}, fail }, gap: backoff},
		"fails every time, with changes": {next: func(time.Time) (time.Time, error) { return time.Time{}, fail }, poke: true, gap: backoff},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := &timerClock{FakeClock: testingclock.NewFakeClock(t0), timers: make(chan time.Duration)}
			ch := make(chan struct{}, 1)
			var syncs []time.Time // written by the loop, read between its waits
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- loop(ctx, logr.Discard(), clk, ch, func(context.Context) (time.Time, error) {
					syncs = append(syncs, clk.Now())
					return tc.next(clk.Now())
				})
			}()
			poked := false
			for clk.Now().Before(t0.Add(time.Hour)) {
				d := <-clk.timers
				if tc.poke && !poked {
					ch <- struct{}{}
					poked = true
					continue
				}
				clk.Step(d)
				poked = false
			}
			<-clk.timers // the loop waits again
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("loop returned %v", err)
			}
			for i := 1; i < len(syncs); i++ {
				lo, hi := tc.gap(i - 1)
				if gap := syncs[i].Sub(syncs[i-1]); gap < lo || gap > hi {
					t.Fatalf("sync %d came %s after the one before, want %s to %s", i, gap, lo, hi)
				}
			}
			if limit := int(time.Hour/minSyncInterval) + 1; len(syncs) > limit {
				t.Errorf("%d syncs in a simulated hour, want at most %d", len(syncs), limit)
			}
		})
	}
}

func TestScheduleAfter(t *testing.T) {
	fail := errors.New("conflict")
	tests := map[string]struct {
		failures   int
		next       time.Time
		err        error
		due, early time.Duration // after start; the error's due may exceed it by retryJitter
	}{
		"nothing asked":            {due: resyncInterval, early: minSyncInterval},
		"a time past":              {next: t0.Add(-time.Hour), due: minSyncInterval, early: minSyncInterval},
		"a time within the floor":  {next: t0.Add(time.Millisecond), due: minSyncInterval, early: minSyncInterval},
		"a time before the resync": {next: t0.Add(20 * time.Second), due: 20 * time.Second, early: minSyncInterval},
		"a time after the resync":  {next: t0.Add(time.Hour), due: resyncInterval, early: minSyncInterval},
		"an error":                 {err: fail, due: minSyncInterval, early: minSyncInterval},
		"the fourth error":         {failures: 3, err: fail, due: 8 * minSyncInterval, early: 8 * minSyncInterval},
		"the hundredth error":      {failures: 99, err: fail, due: maxRetryDelay, early: maxRetryDelay},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := schedule{failures: tc.failures}
			due, early := s.after(t0, tc.next, tc.err)
			slack := time.Duration(0)
			if tc.err != nil {
				slack = time.Duration(float64(tc.due) * retryJitter)
			}
			if d := due.Sub(t0); d < tc.due || d > tc.due+slack {
				t.Errorf("due after %s, want %s (+%s)", d, tc.due, slack)
			}
			if tc.err != nil && !early.Equal(due) {
				t.Errorf("after an error, a change may cut the wait short: early %s, due %s", early, due)
			}
			if tc.err == nil && early.Sub(t0) != tc.early {
				t.Errorf("early after %s, want %s", early.Sub(t0), tc.early)
			}
			if (tc.err == nil) != (s.failures == 0) {
				t.Errorf("%d failures counted after error %v", s.failures, tc.err)
			}
		})
	}
}
