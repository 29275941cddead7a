package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/deadline"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/inflight"
	"github.com/cos-externalizer/cos-externalizer/webhook/server"
)

// slowStore is a Store whose reads of ClusterObjectSets (before a request plans) and writes take a
// time on a fake clock.
type slowStore struct {
	*admissiontest.Store
	clk           *testingclock.FakePassiveClock
	reads, writes time.Duration
}

func (s *slowStore) GetClusterObjectSet(ctx context.Context, name string) (*olmv1.ClusterObjectSet, error) {
	s.clk.SetTime(s.clk.Now().Add(s.reads))
	return s.Store.GetClusterObjectSet(ctx, name)
}

func (s *slowStore) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	s.clk.SetTime(s.clk.Now().Add(s.writes))
	return s.Store.Write(ctx, cosName, plan, dryRun)
}

// worked is what TestWorkBound compares of one request.
type worked struct {
	Allowed    bool
	Code       int32
	Reason     metav1.StatusReason
	RetryAfter int32
	Refusals   map[string]float64
	// WorkRate and WriteRate are the queues' rates after the request, in this request's costs (its
	// charge; its plan's stored bytes) a second; Backlogs what is left in them, in costs.
	WorkRate, WriteRate       float64
	WorkBacklog, WriteBacklog float64
	HeldAfter                 int64
	Secrets                   int
}

// TestWorkBound: on one core at a rate of one request's charge per 8 s, and a write stream of one
// plan's Secrets per 8 s (a fake clock, so nothing depends on the machine's speed), a request that
// would not be planned, or written, before its call's deadline less the margin (3 s) is refused at
// once with a retryable 429 that says when to retry, holding nothing after and writing nothing; one
// that would is admitted; one that finds nothing in flight is admitted whatever its estimate. The
// time until a request has planned its Secrets measures the rate of the work, the time of its
// writes the rate of the writes.
func TestWorkBound(t *testing.T) {
	const ns = "olmv1-system"
	inline, _, _ := externalized(t, "app", 20)
	raw := rawOf(t, inline, "")
	charge, err := inflight.Cost(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := content.PlanFor(inline.Name, cosadmission.PlanInput(inline), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cost, stored := float64(charge), float64(plan.Stats.StoredBytes)
	deadline429 := func(retryAfter int32, rates ...float64) worked {
		return worked{Code: 429, Reason: metav1.StatusReasonTooManyRequests, RetryAfter: retryAfter, Refusals: map[string]float64{string(cosadmission.ReasonDeadline): 1},
			WorkRate: rates[0], WriteRate: rates[1]}
	}
	tests := map[string]struct {
		// workAhead and writesAhead are in flight before it, in its costs (0: none), due in an hour.
		workAhead, writesAhead float64
		timeout                time.Duration // 0: the call named none
		plans, writes          time.Duration // how long it takes to plan and to write
		want                   worked
	}{
		"alone: admitted whatever its estimate, and measured": {
			// Planned in 16 s for 8 assumed: 8 + (16 - 8)/4 = 10 s a cost; written in 4 s: 7 s.
			timeout: 30 * time.Second, plans: 16 * time.Second, writes: 4 * time.Second,
			want: worked{Allowed: true, WorkRate: 1.0 / 10, WriteRate: 1.0 / 7, Secrets: 1},
		},
		"beside long work, in time": {
			// Sharing the core: 16 s, within 30 s less 3; as estimated, so the rate stands. The work
			// ahead had half the core for 16 s, then all of it for the 8 s of the write: two costs.
			workAhead: 100, timeout: 30 * time.Second, plans: 16 * time.Second, writes: 8 * time.Second,
			want: worked{Allowed: true, WorkRate: 1.0 / 8, WriteRate: 1.0 / 8, WorkBacklog: 98, Secrets: 1},
		},
		"beside long work, too late: 429 at once": {
			// 16 s, past 15 s less 3 by 4 s: retry in 4 s.
			workAhead: 100, timeout: 15 * time.Second,
			want: func() worked { w := deadline429(4, 1.0/8, 1.0/8); w.WorkBacklog = 100; return w }(),
		},
		"no timeout named: the shortest webhook's 10 s": {
			workAhead: 100,
			want:      func() worked { w := deadline429(9, 1.0/8, 1.0/8); w.WorkBacklog = 100; return w }(),
		},
		"planned in time, its writes would not be: 429, nothing written": {
			// Planned in 4 s (in time, measured faster: 7 s a cost), while the writes ahead had the
			// stream for 4 s (half a plan); then its write, sharing the stream with them, would take
			// 16 s from 4 s, past 12 s by 8 s.
			writesAhead: 100, timeout: 15 * time.Second, plans: 4 * time.Second,
			want: func() worked { w := deadline429(8, 1.0/7, 1.0/8); w.WriteBacklog = 99.5; return w }(),
		},
		"planned in time, its writes too, beside long writes": {
			// Written in 16 s sharing the stream, as estimated; the writes ahead had 4 s of it
			// alone and half of 16.
			writesAhead: 100, timeout: 30 * time.Second, plans: 4 * time.Second, writes: 16 * time.Second,
			want: worked{Allowed: true, WorkRate: 1.0 / 7, WriteRate: 1.0 / 8, WriteBacklog: 98.5, Secrets: 1},
		},
		"planned too late for any write: 429, nothing written": {
			// Alone, so admitted; planned in 13 s (9.25 s a cost), past 12: no time left to write.
			timeout: 15 * time.Second, plans: 13 * time.Second,
			want: deadline429(1, 1/(8+5.0/4), 1.0/8),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
			clk := testingclock.NewFakePassiveClock(start)
			work := deadline.New(clk, deadline.Options{Cores: 1, Rate: cost / 8, Margin: 3 * time.Second, MinSample: 1})
			writes := deadline.New(clk, deadline.Options{Cores: 1, Rate: stored / 8, Margin: 3 * time.Second, MinSample: 1})
			for q, ahead := range map[*deadline.Queue]float64{work: tc.workAhead * cost, writes: tc.writesAhead * stored} {
				if ahead == 0 {
					continue
				}
				if _, d := q.Admit(int64(ahead), start.Add(time.Hour)); !d.Admitted {
					t.Fatal("the work ahead was refused")
				}
			}
			pool := content.NewPool(1 << 30)
			store := &slowStore{Store: admissiontest.NewStore(ns), clk: clk, reads: tc.plans, writes: tc.writes}
			m := NewMetrics()
			e := &Externalizer{Store: store, Metrics: m, Options: Options{SystemNamespace: ns, Mode: cosadmission.ModeOversized, Threshold: 100,
				InFlight: inflight.Control{Pool: pool, Work: work, Writes: writes, Clock: clk}}}
			ctx := context.Background()
			if tc.timeout > 0 {
				ctx = callContext(clk, tc.timeout)
			}
			req := request(t, admissionv1.Create, inline, "", nil)
			req.Name = inline.Name
			resp := e.Handle(ctx, req)
			got := worked{Allowed: resp.Allowed, WorkRate: work.Rate() / cost, WriteRate: writes.Rate() / stored,
				WorkBacklog: work.Backlog() / cost, WriteBacklog: writes.Backlog() / stored, HeldAfter: pool.Used(), Secrets: len(store.Secrets())}
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
			for _, reason := range []string{string(cosadmission.ReasonDeadline), string(cosadmission.ReasonBusy), string(cosadmission.ReasonCanceled)} {
				refusals[reason] = counter(m.Refusals.WithLabelValues(reason))
			}
			got.Refusals = nonZero(refusals)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(1e-9, 1e-9)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if rate := gauge(m.WorkRate); rate != work.Rate() {
				t.Errorf("rate gauge %v, want %v", rate, work.Rate())
			}
		})
	}
}

// TestValidatorWorkBound: the validating webhook's requests share the queue, are refused the same
// way, and are measured only when slower than estimated (they plan nothing).
func TestValidatorWorkBound(t *testing.T) {
	inline, _, _ := externalized(t, "app", 5)
	raw := rawOf(t, inline, "")
	cost, err := inflight.Cost(raw, nil)
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
			ctx := callContext(clk, tc.timeout)
			o := Options{InFlight: inflight.Control{Work: q, Clock: clk}}
			resp := o.charging(NewMetrics(), h).Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
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

// callContext is the context the webhook server gives a request whose call names timeout, arrived
// at clk's time (server.Hook).
func callContext(clk clock.PassiveClock, timeout time.Duration) context.Context {
	var ctx context.Context
	h := server.Hook(context.Background(), clk, nil, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { ctx = r.Context() }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, MutatePath+"?timeout="+timeout.String(), http.NoBody))
	return ctx
}
