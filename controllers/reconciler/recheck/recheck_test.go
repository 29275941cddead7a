package recheck

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/conditions"
)

func TestAfter(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	exact := func(d time.Duration) time.Duration { return d }
	tests := map[string]struct {
		policy Policy
		in     Input
		want   time.Duration
	}{
		"complete: the drift check":                     {policy: Policy{DriftCheck: 10 * time.Minute}, in: Input{Kind: conditions.Complete}, want: 10 * time.Minute},
		"complete, drift check off: events only":        {in: Input{Kind: conditions.Complete}},
		"complete with refs outside: the sooner check":  {policy: Policy{DriftCheck: 10 * time.Minute, ExternalRefCheck: time.Minute}, in: Input{Kind: conditions.Complete, RefsOutside: true}, want: time.Minute},
		"complete with refs outside, drift check off":   {policy: Policy{ExternalRefCheck: time.Minute}, in: Input{Kind: conditions.Complete, RefsOutside: true}, want: time.Minute},
		"complete, drift check sooner than refs":        {policy: Policy{DriftCheck: 30 * time.Second, ExternalRefCheck: time.Minute}, in: Input{Kind: conditions.Complete, RefsOutside: true}, want: 30 * time.Second},
		"complete, refs inside: no ref check":           {policy: Policy{DriftCheck: 10 * time.Minute, ExternalRefCheck: time.Minute}, in: Input{Kind: conditions.Complete}, want: 10 * time.Minute},
		"blocked: waits for a person":                   {policy: Policy{DriftCheck: 10 * time.Minute, ExternalRefCheck: time.Minute}, in: Input{Kind: conditions.Blocked}},
		"blocked with refs outside: looks again":        {policy: Policy{DriftCheck: 10 * time.Minute, ExternalRefCheck: time.Minute}, in: Input{Kind: conditions.Blocked, RefsOutside: true}, want: time.Minute},
		"blocked with refs outside, ref check off":      {policy: Policy{DriftCheck: 10 * time.Minute}, in: Input{Kind: conditions.Blocked, RefsOutside: true}},
		"empty: waits for its phases":                   {policy: Policy{DriftCheck: 10 * time.Minute}, in: Input{Kind: conditions.Empty}},
		"archived: teardown paces itself":               {policy: Policy{DriftCheck: 10 * time.Minute, ExternalRefCheck: time.Minute}, in: Input{Kind: conditions.Archived, RefsOutside: true}},
		"rolling out: the fallback":                     {in: Input{Kind: conditions.RollingOut}, want: Fallback},
		"retrying: the fallback":                        {in: Input{Kind: conditions.Retrying}, want: Fallback},
		"rolling out, deadline far: the fallback":       {in: Input{Kind: conditions.RollingOut, Deadline: now.Add(time.Hour)}, want: Fallback},
		"rolling out, deadline sooner: just past it":    {in: Input{Kind: conditions.RollingOut, Deadline: now.Add(30 * time.Second)}, want: 30*time.Second + DeadlineMargin},
		"retrying, deadline sooner: just past it":       {in: Input{Kind: conditions.Retrying, Deadline: now.Add(time.Nanosecond)}, want: time.Nanosecond + DeadlineMargin},
		"rolling out, deadline now: the fallback":       {in: Input{Kind: conditions.RollingOut, Deadline: now}, want: Fallback},
		"rolling out, deadline passed: the fallback":    {in: Input{Kind: conditions.RollingOut, Deadline: now.Add(-time.Minute)}, want: Fallback},
		"rolling out, deadline at the fallback exactly": {in: Input{Kind: conditions.RollingOut, Deadline: now.Add(Fallback)}, want: Fallback},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.policy.Clock = testingclock.NewFakePassiveClock(now)
			tc.policy.Jitter = exact
			if got := tc.policy.After(tc.in); got != tc.want {
				t.Errorf("After = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAfterFollowsTheClock: the same deadline gives a shorter wait as the clock moves towards it,
// and the fallback once it has passed.
func TestAfterFollowsTheClock(t *testing.T) {
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(start)
	p := Policy{Clock: clk}
	in := Input{Kind: conditions.RollingOut, Deadline: start.Add(5 * time.Minute)}
	tests := map[string]struct {
		elapsed time.Duration
		want    time.Duration
	}{
		"long before":   {elapsed: 0, want: Fallback},
		"within reach":  {elapsed: 4 * time.Minute, want: time.Minute + DeadlineMargin},
		"a second left": {elapsed: 5*time.Minute - time.Second, want: time.Second + DeadlineMargin},
		"passed":        {elapsed: 6 * time.Minute, want: Fallback},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk.SetTime(start.Add(tc.elapsed))
			if got := p.After(in); got != tc.want {
				t.Errorf("After = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDefaultJitter: without an injected jitter, a periodic check falls within 90% and 108% of its
// interval.
func TestDefaultJitter(t *testing.T) {
	p := Policy{Clock: testingclock.NewFakePassiveClock(time.Time{}), DriftCheck: 10 * time.Minute}
	for range 100 {
		if got := p.After(Input{Kind: conditions.Complete}); got < 9*time.Minute || got > 10*time.Minute*108/100 {
			t.Fatalf("After = %v, want within [9m, 10m48s]", got)
		}
	}
}
