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
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/inflight"
)

// poolWatch is a Store that records what the admission pool holds when the pipeline reads and writes.
type poolWatch struct {
	*admissiontest.Store
	pool *content.Pool
	seen []int64
}

func (p *poolWatch) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	p.seen = append(p.seen, p.pool.Used())
	return p.Store.Write(ctx, cosName, plan, dryRun)
}

// charged is what TestAdmissionCharged compares of one request.
type charged struct {
	Allowed    bool
	Code       int32
	Reason     metav1.StatusReason
	RetryAfter int32
	Refusals   map[string]float64
	// HeldAtWrite is what the pool held when the Secrets were written; HeldAfter once answered.
	HeldAtWrite []int64
	HeldAfter   int64
}

// TestAdmissionCharged: the mutating webhook charges a request its estimated cost before decoding it
// and holds it until it answers; without room it refuses at once with a retryable 429 (and for an
// update that cannot resolve its stored refs within its room, too); a request larger than the whole
// pool is refused as too large; none leaves anything held.
func TestAdmissionCharged(t *testing.T) {
	const ns = "olmv1-system"
	inline, stored, secret := externalized(t, "app", 20)
	other, _, _ := externalized(t, "other", 20)
	createCost, err := inflight.Cost(rawOf(t, inline, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	updateCost, err := inflight.Cost(rawOf(t, other, ""), rawOf(t, stored, ""))
	if err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		op                   admissionv1.Operation
		old, obj             *olmv1.ClusterObjectSet
		capacity, othersHold int64
		want                 charged
	}{
		"create: charged until answered": {op: admissionv1.Create, obj: inline, capacity: createCost,
			want: charged{Allowed: true, HeldAtWrite: []int64{createCost}}},
		"create: no room, refused at once": {op: admissionv1.Create, obj: inline, capacity: createCost, othersHold: 1,
			want: charged{Code: 429, Reason: metav1.StatusReasonTooManyRequests, RetryAfter: 1, Refusals: map[string]float64{string(cosadmission.ReasonBusy): 1}, HeldAfter: 1}},
		"create: larger than the pool": {op: admissionv1.Create, obj: inline, capacity: createCost - 1,
			want: charged{Code: 413, Refusals: map[string]float64{string(cosadmission.ReasonTooLarge): 1}}},
		"update: resolving the stored refs past its room": {op: admissionv1.Update, old: stored, obj: other, capacity: updateCost,
			want: charged{Code: 429, Reason: metav1.StatusReasonTooManyRequests, RetryAfter: 1, Refusals: map[string]float64{string(cosadmission.ReasonBusy): 1}}},
		// Room for the Secret it reads (charged ReadCost before the read) and the value it resolves.
		"update: resolving the stored refs with room": {op: admissionv1.Update, old: stored, obj: other, capacity: 2*updateCost + secretdata.ReadCost,
			want: charged{Code: 422, Reason: metav1.StatusReasonInvalid, Refusals: map[string]float64{string(cosadmission.ReasonInvalid): 1}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pool := content.NewPool(tc.capacity)
			others := pool.NewBudget(0)
			if err := others.Hold(tc.othersHold); err != nil {
				t.Fatal(err)
			}
			store := &poolWatch{Store: admissiontest.NewStore(ns), pool: pool}
			store.AddSecret(secret.DeepCopy())
			m := NewMetrics()
			e := &Externalizer{Store: store, Metrics: m, Options: Options{SystemNamespace: ns, Mode: cosadmission.ModeOversized, Threshold: 100,
				InFlight: inflight.Control{Pool: pool}}}
			// No wait for room: the test never waits.
			req := request(t, tc.op, tc.obj, "", tc.old)
			req.Name = tc.obj.Name
			resp := e.Handle(context.Background(), req)
			got := charged{Allowed: resp.Allowed, HeldAtWrite: store.seen, HeldAfter: pool.Used()}
			if r := resp.Result; r != nil && !resp.Allowed {
				got.Code, got.Reason = r.Code, r.Reason
				if r.Details != nil {
					got.RetryAfter = r.Details.RetryAfterSeconds
				}
				if r.Code == 429 && !strings.Contains(r.Message, "retry") {
					t.Errorf("the 429 does not say to retry: %s", r.Message)
				}
			}
			refusals := map[string]float64{}
			for _, reason := range []string{string(cosadmission.ReasonBusy), string(cosadmission.ReasonTooLarge), string(cosadmission.ReasonInvalid), string(cosadmission.ReasonBadRequest)} {
				refusals[reason] = counter(m.Refusals.WithLabelValues(reason))
			}
			got.Refusals = nonZero(refusals)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			others.Release()
		})
	}
}

// TestValidatorCharged: the validating webhook's handler is charged before its decoder runs, holds
// the charge while it runs, and is not called at all without room.
func TestValidatorCharged(t *testing.T) {
	obj := b.COS("app", b.WithPhase("configuration", b.InlineConfigMaps("default", "app", 5)...))
	raw := rawOf(t, obj, "")
	cost, err := inflight.Cost(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		op         admissionv1.Operation
		othersHold int64
		raw        []byte
		wantCalled bool
		wantHeld   int64 // while the handler runs
		wantCode   int32
	}{
		"create: charged":         {op: admissionv1.Create, raw: raw, wantCalled: true, wantHeld: cost},
		"create: no room":         {op: admissionv1.Create, raw: raw, othersHold: 1, wantCode: 429},
		"create: not JSON":        {op: admissionv1.Create, raw: []byte("{"), wantCode: 400},
		"delete: passed as it is": {op: admissionv1.Delete, wantCalled: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pool := content.NewPool(cost)
			others := pool.NewBudget(0)
			if err := others.Hold(tc.othersHold); err != nil {
				t.Fatal(err)
			}
			defer others.Release()
			called, held := false, int64(-1)
			h := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
				called, held = true, pool.Used()
				return admission.Allowed("")
			})
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			resp := Options{InFlight: inflight.Control{Pool: pool, Wait: time.Hour}}.charging(NewMetrics(), h).Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: tc.op, Object: runtime.RawExtension{Raw: tc.raw}}})
			var code int32
			if !resp.Allowed && resp.Result != nil {
				code = resp.Result.Code
			}
			if called != tc.wantCalled || code != tc.wantCode || (called && held != tc.wantHeld) {
				t.Errorf("called %v holding %d, code %d; want called %v holding %d, code %d", called, held, code, tc.wantCalled, tc.wantHeld, tc.wantCode)
			}
			if used := pool.Used(); used != tc.othersHold {
				t.Errorf("pool Used = %d after the request, want %d", used, tc.othersHold)
			}
		})
	}
}
