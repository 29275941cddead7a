package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cosadmission "github.com/cos-externalizer/cos-externalizer/internal/admission"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/admissiontest"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/deadline"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
)

// slowStore is a Store whose writes take a time on a fake clock.
type slowStore struct {
	*admissiontest.Store
	clk   *testingclock.FakePassiveClock
	takes time.Duration
}

func (s *slowStore) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	s.clk.SetTime(s.clk.Now().Add(s.takes))
	return s.Store.Write(ctx, cosName, plan, dryRun)
}

// worked is what TestWorkBound compares of one request.
type worked struct {
	Allowed    bool
	Code       int32
	Reason     metav1.StatusReason
	RetryAfter int32
	Refusals   map[string]float64
	// Rate is the queue's rate after the request, in costs of this request per second; HeldAfter
	// what the pool and the queue hold once it was answered.
	Rate                      float64
	HeldAfter, BacklogAfter   float64
	WriteSecrets, InFlightNow int
}

// TestWorkBound: on one core at a rate of one request's cost per 8 s (a fake clock, so nothing
// depends on the machine's speed), a request that would not finish before its call's deadline less
// the margin (3 s) is refused at once with a retryable 429 that says when to retry, holding nothing
// after and writing nothing; one that would, is admitted; one that finds nothing in flight is
// admitted whatever its estimate; a request that did all its work measures the rate.
func TestWorkBound(t *testing.T) {
	const ns = "olmv1-system"
	inline, _, _ := externalized(t, "app", 20)
	raw := rawOf(t, inline, "")
	cost, err := admissionCost(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	perCost := float64(cost) // the rate's unit: this request's cost per second
	tests := map[string]struct {
		// ahead is the work in flight before it, in its costs (0: none); due when it is.
		ahead   float64
		timeout time.Duration // 0: the call named none
		writes  time.Duration // how long its write takes
		want    worked
	}{
		"alone: admitted whatever its estimate, and measured": {
			// 8 s a cost assumed, 16 s taken: 8 + (16 - 8)/4 = 10 s a cost.
			timeout: 15 * time.Second, writes: 16 * time.Second,
			want: worked{Allowed: true, Rate: 1.0 / 10, WriteSecrets: 1},
		},
		"alone, faster than assumed: the rate rises": {
			timeout: 15 * time.Second, writes: 4 * time.Second,
			want: worked{Allowed: true, Rate: 1.0 / 7, WriteSecrets: 1},
		},
		"beside a long request, in time": {
			// Sharing the core: 16 s, within 30 s less 3; as estimated, so the rate stands. The one
			// ahead had half the core for 16 s: one cost done.
			ahead: 100, timeout: 30 * time.Second, writes: 16 * time.Second,
			want: worked{Allowed: true, Rate: 1.0 / 8, BacklogAfter: 99 * perCost, WriteSecrets: 1},
		},
		"beside a long request, too late: 429 at once": {
			// 16 s, past 15 s less 3 by 4 s: retry in 4 s.
			ahead: 100, timeout: 15 * time.Second, writes: 16 * time.Second,
			want: worked{Code: 429, Reason: metav1.StatusReasonTooManyRequests, RetryAfter: 4, Refusals: map[string]float64{RefusalDeadline: 1},
				Rate: 1.0 / 8, BacklogAfter: 100 * perCost},
		},
		"no timeout named: the shortest webhook's 10 s": {
			ahead: 100, writes: 16 * time.Second,
			want: worked{Code: 429, Reason: metav1.StatusReasonTooManyRequests, RetryAfter: 9, Refusals: map[string]float64{RefusalDeadline: 1},
				Rate: 1.0 / 8, BacklogAfter: 100 * perCost},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
			clk := testingclock.NewFakePassiveClock(start)
			q := deadline.New(clk, deadline.Options{Cores: 1, Rate: perCost / 8, Margin: 3 * time.Second, MinSample: 1})
			if tc.ahead > 0 {
				if _, d := q.Admit(int64(tc.ahead*perCost), start.Add(time.Hour)); !d.Admitted {
					t.Fatal("the request ahead was refused")
				}
			}
			pool := content.NewPool(1 << 30)
			store := &slowStore{Store: admissiontest.NewStore(ns), clk: clk, takes: tc.writes}
			m := NewMetrics()
			e := &Externalizer{Store: store, Metrics: m, Options: Options{SystemNamespace: ns, Mode: cosadmission.ModeOversized, Threshold: 100,
				Admission: AdmissionLimits{Pool: pool, Work: q, Clock: clk}}}
			ctx := context.Background()
			if tc.timeout > 0 {
				ctx = context.WithValue(ctx, callDeadlineKey{}, callDeadline{at: start.Add(tc.timeout), told: true})
			}
			req := request(t, admissionv1.Create, inline, "", nil)
			req.Name = inline.Name
			resp := e.Handle(ctx, req)
			got := worked{Allowed: resp.Allowed, Rate: q.Rate() / perCost, HeldAfter: float64(pool.Used()), BacklogAfter: q.Backlog(),
				WriteSecrets: len(store.Secrets())}
			if r := resp.Result; r != nil && !resp.Allowed {
				got.Code, got.Reason = r.Code, r.Reason
				if r.Details != nil {
					got.RetryAfter = r.Details.RetryAfterSeconds
				}
				if r.Code == 429 && !strings.Contains(r.Message, "retry, nothing was written") {
					t.Errorf("the 429 does not say to retry: %s", r.Message)
				}
			}
			refusals := map[string]float64{}
			for _, reason := range []string{RefusalDeadline, RefusalBusy, RefusalCanceled} {
				refusals[reason] = counter(m.Refusals.WithLabelValues(reason))
			}
			got.Refusals = nonZero(refusals)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return a == b || (a-b)/b < 1e-9 && (b-a)/b < 1e-9 })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if rate := gauge(m.WorkRate); rate != q.Rate() {
				t.Errorf("rate gauge %v, want %v", rate, q.Rate())
			}
		})
	}
}

// TestValidatorWorkBound: the validating webhook's requests share the queue, are refused the same
// way, and are measured only when slower than estimated (they plan nothing).
func TestValidatorWorkBound(t *testing.T) {
	inline, _, _ := externalized(t, "app", 5)
	raw := rawOf(t, inline, "")
	cost, err := admissionCost(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	perCost := float64(cost)
	tests := map[string]struct {
		ahead    float64
		timeout  time.Duration
		takes    time.Duration
		wantCode int32
		wantRate float64 // in costs per second
	}{
		"in time, fast: not measured":    {timeout: 15 * time.Second, takes: time.Second, wantRate: 1.0 / 8},
		"in time, slow: measured":        {timeout: 15 * time.Second, takes: 16 * time.Second, wantRate: 1.0 / 10},
		"too late beside a long request": {ahead: 100, timeout: 15 * time.Second, wantCode: 429, wantRate: 1.0 / 8},
		// Half the core for 8 s, then all of it for 4: 12 s, within 15 less 3.
		"in time beside a small request": {ahead: 0.5, timeout: 15 * time.Second, takes: time.Second, wantRate: 1.0 / 8},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
			clk := testingclock.NewFakePassiveClock(start)
			q := deadline.New(clk, deadline.Options{Cores: 1, Rate: perCost / 8, Margin: 3 * time.Second, MinSample: 1})
			if tc.ahead > 0 {
				if _, d := q.Admit(int64(tc.ahead*perCost), start.Add(time.Hour)); !d.Admitted {
					t.Fatal("the request ahead was refused")
				}
			}
			h := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
				clk.SetTime(clk.Now().Add(tc.takes))
				return admission.Allowed("")
			})
			ctx := context.WithValue(context.Background(), callDeadlineKey{}, callDeadline{at: start.Add(tc.timeout), told: true})
			l := AdmissionLimits{Work: q, Clock: clk}
			resp := l.charging(0, NewMetrics(), h).Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
			var code int32
			if !resp.Allowed && resp.Result != nil {
				code = resp.Result.Code
			}
			if code != tc.wantCode {
				t.Errorf("code %d, want %d", code, tc.wantCode)
			}
			if got := q.Rate() / perCost; got-tc.wantRate > 1e-9 || tc.wantRate-got > 1e-9 {
				t.Errorf("rate %v costs a second, want %v", got, tc.wantRate)
			}
		})
	}
}

// TestTooLateMessage: the refusal says why, in seconds, what is in flight and what to do.
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
			resp := tooLate(q, 72<<20, tc.d)
			if diff := cmp.Diff(tc.want, resp.Result.Message); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got, want := resp.Result.Details.RetryAfterSeconds, int32(tc.d.RetryAfter/time.Second); got != want {
				t.Errorf("Retry-After %d, want %d", got, want)
			}
		})
	}
}
