package callerwatch

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestCheck(t *testing.T) {
	const window = 5 * time.Minute
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	// Each event is an offset from the start at which it is recorded; check is the offset judged.
	type events struct{ handshake, authenticated, created []time.Duration }
	for name, tc := range map[string]struct {
		ev      events
		check   time.Duration
		unready bool
	}{
		"nothing happened":                                {check: time.Hour},
		"refused, created, within the first window":       {ev: events{handshake: []time.Duration{time.Minute}, created: []time.Duration{time.Minute}}, check: window - time.Nanosecond},
		"refused and created for a window":                {ev: events{handshake: []time.Duration{time.Minute, 5 * time.Minute}, created: []time.Duration{6 * time.Minute}}, check: 6 * time.Minute, unready: true},
		"refused, created, authenticated once":            {ev: events{handshake: []time.Duration{6 * time.Minute}, created: []time.Duration{6 * time.Minute}, authenticated: []time.Duration{2 * time.Minute}}, check: 6 * time.Minute},
		"authenticated exactly a window ago":              {ev: events{handshake: []time.Duration{7 * time.Minute}, created: []time.Duration{7 * time.Minute}, authenticated: []time.Duration{2 * time.Minute}}, check: 7 * time.Minute, unready: true},
		"no handshake: a healthy idle replica":            {ev: events{created: []time.Duration{9 * time.Minute}, authenticated: []time.Duration{time.Minute}}, check: 10 * time.Minute},
		"handshakes but nothing created":                  {ev: events{handshake: []time.Duration{9 * time.Minute}}, check: 10 * time.Minute},
		"out of the Service: last handshake a window ago": {ev: events{handshake: []time.Duration{5 * time.Minute}, created: []time.Duration{9 * time.Minute}}, check: 10 * time.Minute},
		"last handshake just inside the window":           {ev: events{handshake: []time.Duration{5*time.Minute + time.Nanosecond}, created: []time.Duration{9 * time.Minute}}, check: 10 * time.Minute, unready: true},
		"created a window ago":                            {ev: events{handshake: []time.Duration{9 * time.Minute}, created: []time.Duration{5 * time.Minute}}, check: 10 * time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(start)
			w := New(clk, window)
			type ev struct {
				at   time.Duration
				mark func()
			}
			var all []ev
			for _, d := range tc.ev.handshake {
				all = append(all, ev{d, w.Handshake})
			}
			for _, d := range tc.ev.authenticated {
				all = append(all, ev{d, w.Authenticated})
			}
			for _, d := range tc.ev.created {
				all = append(all, ev{d, w.Created})
			}
			for _, e := range all {
				clk.SetTime(start.Add(e.at))
				e.mark()
			}
			clk.SetTime(start.Add(tc.check))
			err := w.Check()
			if got := err != nil; got != tc.unready {
				t.Fatalf("unready = %v (%v), want %v", got, err, tc.unready)
			}
		})
	}
}

func TestNilWatchIsReady(t *testing.T) {
	var w *Watch
	w.Handshake()
	w.Authenticated()
	w.Created()
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
}

func FuzzCheck(f *testing.F) {
	f.Add(int64(60), int64(120), int64(180), int64(400))
	f.Fuzz(func(t *testing.T, h, a, c, now int64) {
		start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
		clk := testingclock.NewFakePassiveClock(start)
		w := New(clk, time.Minute)
		sec := func(s int64) time.Time { return start.Add(time.Duration(s%100000) * time.Second) }
		// Events are recorded in time order, as a clock that never goes back gives them.
		for _, e := range []struct {
			at   int64
			mark func()
		}{{h, w.Handshake}, {a, w.Authenticated}, {c, w.Created}} {
			if e.at < 0 {
				continue
			}
			clk.SetTime(sec(e.at))
			e.mark()
			clk.SetTime(start)
		}
		clk.SetTime(sec(max(now, 0)))
		err := w.Check()
		// Never unready when an authenticated call came within the window of now, whatever else.
		if a >= 0 && !sec(a).After(clk.Now()) && clk.Now().Sub(sec(a)) < time.Minute && err != nil {
			t.Fatalf("unready despite an authenticated call %v ago: %v", clk.Now().Sub(sec(a)), err)
		}
	})
}
