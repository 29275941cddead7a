package inflight

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/deadline"
)

// TestBusyMessage: the refusal says how much is admitted at once, the limit and what to do, in MiB,
// and nothing of any Secret; it is a 429 with reason busy.
func TestBusyMessage(t *testing.T) {
	pool := content.NewPool(256 << 20)
	held := pool.NewBudget(0)
	if err := held.Hold(200<<20 + 1); err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	r := Control{Pool: pool}.Busy(needs(16 << 20))
	want := "the webhook is admitting 201 MiB of ClusterObjectSets at once (limit 256 MiB, --max-concurrent-admission-bytes): no room for the 16 MiB this one needs; retry, nothing was written"
	if diff := cmp.Diff(want, r.Err.Error()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if r.Reason != admission.ReasonBusy || r.Code != http.StatusTooManyRequests || RetryAfter(r.Err) != 0 {
		t.Errorf("reason %s, code %d, Retry-After %v; want busy, 429 and none of its own", r.Reason, r.Code, RetryAfter(r.Err))
	}
}

// TestTooLateMessage: the refusal says why, in seconds, what is in flight and what to do, and asks
// for the decision's Retry-After.
func TestTooLateMessage(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	q := deadline.New(testingclock.NewFakePassiveClock(now), deadline.Options{Cores: 2})
	tests := map[string]struct {
		d    deadline.Decision
		want string
	}{
		"itself too late": {
			d: deadline.Decision{Now: now, Finish: now.Add(14500 * time.Millisecond), Latest: now.Add(12 * time.Second), InFlight: 4, Ahead: 180 << 20, Rate: 35e6, RetryAfter: 3 * time.Second},
			want: "the webhook cannot finish this ClusterObjectSet in time: it would finish in 14.5 s, where the API server's deadline for this call, less a margin, leaves 12.0 s, " +
				"with 4 requests in flight (180 MiB of work left, as --max-concurrent-admission-bytes charges it) and its 72 MiB, at an estimated 35 MB/s a core on 2 cores; retry, nothing was written",
		},
		"others would be late": {
			d: deadline.Decision{Now: now, Finish: now.Add(2 * time.Second), Latest: now.Add(12 * time.Second), Delays: true, InFlight: 1, Ahead: 1 << 20, Rate: 35e6, RetryAfter: time.Second},
			want: "the webhook cannot finish this ClusterObjectSet in time: requests admitted before it would then miss the API server's deadline for their call, " +
				"with 1 requests in flight (1 MiB of work left, as --max-concurrent-admission-bytes charges it) and its 72 MiB, at an estimated 35 MB/s a core on 2 cores; retry, nothing was written",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tooLate(q, 72<<20, tc.d)
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got := RetryAfter(err); got != tc.d.RetryAfter {
				t.Errorf("Retry-After %v, want %v", got, tc.d.RetryAfter)
			}
		})
	}
}

// TestTooLateWriteMessage: a write not made says why, what is in flight and what to do, asks for the
// decision's Retry-After, and is admission.ErrTooLate.
func TestTooLateWriteMessage(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	err := error(&TooLateError{bytes: 1536 << 10, decision: deadline.Decision{Now: now, Finish: now.Add(9 * time.Second), Latest: now.Add(4 * time.Second),
		InFlight: 3, Ahead: 4 << 20, Rate: 2.5e6, RetryAfter: 5 * time.Second}})
	want := "the webhook cannot write the 1536 KiB of Secrets of this ClusterObjectSet in time: they would be written in 9.0 s, where the API server's deadline for this call, " +
		"less a margin, leaves 4.0 s, with 3 writes in flight (4096 KiB left) at an estimated 2.5 MB/s; retry, nothing was written"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !errors.Is(err, admission.ErrTooLate) || RetryAfter(err) != 5*time.Second || RetryAfter(admission.ErrRetryLater) != 0 {
		t.Errorf("ErrTooLate %t, Retry-After %v", errors.Is(err, admission.ErrTooLate), RetryAfter(err))
	}
}
