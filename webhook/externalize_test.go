package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
	"github.com/cos-externalizer/cos-externalizer/webhook/unreferenced"
)

// handled is what a test compares of the webhook's response and metrics.
type handled struct {
	Allowed  bool
	Code     int32
	Causes   []string
	Patched  []string
	Warnings []string
	// Metrics are the counters that moved.
	Metrics map[string]float64
}

// TestHandleTranslates checks the webhook's translation of the pipeline's answer (the decisions are
// webhook/admission's tests): the patch, the warnings, the refusal's status and the metrics.
func TestHandleTranslates(t *testing.T) {
	const ns = "olmv1-system"
	inline, stored, secret := externalized(t, "app", 2)
	notOurs := secret.DeepCopy()
	notOurs.Data = map[string][]byte{"other": []byte("{}")}
	lastApplied := inline.DeepCopy()
	raw, err := json.Marshal(inline)
	if err != nil {
		t.Fatal(err)
	}
	lastApplied.Annotations[cosadmission.LastAppliedAnnotation] = string(raw)
	summary := cosadmission.WarningPrefix + "externalized 2 objects into 1 Secret in olmv1-system ("
	phases := "/spec/phases"

	tests := map[string]struct {
		op       admissionv1.Operation
		old, obj *olmv1.ClusterObjectSet
		raw      string
		secrets  []*corev1.Secret
		dryRun   bool
		want     handled
	}{
		"create: externalized": {op: admissionv1.Create, obj: inline,
			want: handled{Allowed: true, Patched: []string{phases}, Warnings: []string{summary},
				Metrics: map[string]float64{"objects": 2, "secrets": 1}}},
		"create: a dry run writes nothing": {op: admissionv1.Create, obj: inline, dryRun: true,
			want: handled{Allowed: true, Patched: []string{phases}, Warnings: []string{summary},
				Metrics: map[string]float64{"objects": 2, "dryRuns": 1}}},
		"create: kubectl's last-applied annotation gets the refs": {op: admissionv1.Create, obj: lastApplied,
			want: handled{Allowed: true, Patched: []string{phases, "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"},
				Warnings: []string{summary}, Metrics: map[string]float64{"objects": 2, "secrets": 1}}},
		"create: invalid": {op: admissionv1.Create, obj: b.COS("app", always, b.WithProgressDeadline(5)),
			want: handled{Code: 422, Causes: []string{"spec.progressDeadlineMinutes"}, Metrics: map[string]float64{"refused invalid": 1}}},
		"create: a Secret not ours": {op: admissionv1.Create, obj: inline, secrets: []*corev1.Secret{notOurs},
			want: handled{Code: 409, Metrics: map[string]float64{"refused secret_conflict": 1}}},
		"create: not JSON": {op: admissionv1.Create, raw: "{",
			want: handled{Code: 400, Metrics: map[string]float64{"refused bad_request": 1}}},
		"update: the same objects get the stored refs": {op: admissionv1.Update, old: stored, obj: inline, secrets: []*corev1.Secret{secret},
			want: handled{Allowed: true, Patched: []string{phases}}},
		"update: heals": {op: admissionv1.Update, old: stored, obj: inline,
			want: handled{Allowed: true, Patched: []string{phases}, Metrics: map[string]float64{"secrets": 1},
				Warnings: []string{cosadmission.WarningPrefix + "1 Secret of the stored refs missing (" + secret.Name + "): the submitted objects are their content: re-created 1 Secret"}}},
		"update: other objects": {op: admissionv1.Update, old: stored, obj: b.COS("app", always, b.WithPhase("configuration", b.InlineConfigMaps("default", "other", 2)...)),
			secrets: []*corev1.Secret{secret},
			want:    handled{Code: 422, Causes: []string{"spec.phases"}, Metrics: map[string]float64{"refused invalid": 1}}},
		"delete: allowed": {op: admissionv1.Delete, raw: "{}", want: handled{Allowed: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			store := admissiontest.NewStore(ns)
			for _, s := range tc.secrets {
				store.AddSecret(s)
			}
			m := NewMetrics()
			e := &Externalizer{Store: store, Metrics: m,
				Options: Options{SystemNamespace: ns, Mode: cosadmission.ModeOversized, Threshold: 100}}
			req := request(t, tc.op, tc.obj, tc.raw, tc.old)
			req.DryRun = &tc.dryRun
			resp := e.Handle(context.Background(), req)
			got := handled{Allowed: resp.Allowed}
			if r := resp.Result; r != nil && !resp.Allowed {
				got.Code = r.Code
				if r.Details != nil {
					for _, c := range r.Details.Causes {
						got.Causes = append(got.Causes, c.Field)
					}
				}
			}
			for _, p := range resp.Patches {
				got.Patched = append(got.Patched, p.Path)
			}
			for _, w := range resp.Warnings {
				if strings.HasPrefix(w, summary) {
					w = summary // its sizes are the planner's
				}
				got.Warnings = append(got.Warnings, w)
			}
			got.Metrics = nonZero(map[string]float64{
				"objects": counter(m.ObjectsExternalized), "secrets": counter(m.SecretsWritten), "dryRuns": counter(m.DryRuns),
				"refused invalid": counter(m.Refusals.WithLabelValues(string(cosadmission.ReasonInvalid))), "refused secret_conflict": counter(m.Refusals.WithLabelValues(string(cosadmission.ReasonSecretConflict))),
				"refused bad_request": counter(m.Refusals.WithLabelValues(string(cosadmission.ReasonBadRequest))),
			})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRefusalToRetryLater: a refusal of the pipeline or the in-flight bounds to retry later (the
// unreferenced bound, no room, no time) is the API server's 429 TooManyRequests with a Retry-After:
// the one its error names, else one second.
func TestRefusalToRetryLater(t *testing.T) {
	tests := map[string]struct {
		err  error
		want int32
	}{
		"the unreferenced bound":   {err: &unreferenced.LimitError{Secrets: 1, Bytes: 10, MaxSecrets: 1, MaxBytes: 100, OverSecrets: true}, want: busyRetryAfter},
		"an error naming its time": {err: fmt.Errorf("writing: %w", laterError{}), want: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp := refusal("x", &cosadmission.Refusal{Reason: cosadmission.ReasonUnreferenced, Code: http.StatusTooManyRequests, Err: tc.err})
			r := resp.Result
			if resp.Allowed || r.Code != http.StatusTooManyRequests || r.Reason != metav1.StatusReasonTooManyRequests || r.Details == nil ||
				r.Details.RetryAfterSeconds != tc.want || r.Message != tc.err.Error() {
				t.Errorf("got %+v, want 429 TooManyRequests, Retry-After %d, the error's message", r, tc.want)
			}
		})
	}
}

// laterError is a refusal's error that says when to retry, as inflight's do.
type laterError struct{}

func (laterError) Error() string             { return "later" }
func (laterError) RetryAfter() time.Duration { return 3 * time.Second }

// TestRefusalReasonsAreDistinct: each refusal reason is a label of its own in the refusal metric,
// so that an alert or the dashboard tells apart what the request did wrong (a request that could not
// be decoded) from what the webhook did (an internal error).
func TestRefusalReasonsAreDistinct(t *testing.T) {
	seen := map[cosadmission.Reason]bool{}
	for _, r := range []cosadmission.Reason{
		cosadmission.ReasonInvalid, cosadmission.ReasonTooLarge, cosadmission.ReasonNameRequired, cosadmission.ReasonSecretConflict,
		cosadmission.ReasonWriteFailed, cosadmission.ReasonInternal, cosadmission.ReasonUnreferenced, cosadmission.ReasonBusy,
		cosadmission.ReasonDeadline, cosadmission.ReasonCanceled, cosadmission.ReasonBadRequest, cosadmission.ReasonSecretInUse,
		cosadmission.ReasonClientCertificate,
	} {
		if seen[r] {
			t.Errorf("reason %q is used twice", r)
		}
		seen[r] = true
	}
}

// nonZero returns the counts of counts that are not zero, nil when none is: what a test case's want
// names.
func nonZero(counts map[string]float64) map[string]float64 {
	var out map[string]float64
	for name, v := range counts {
		if v != 0 {
			if out == nil {
				out = map[string]float64{}
			}
			out[name] = v
		}
	}
	return out
}

func gauge(g prometheus.Gauge) float64 {
	m := &dto.Metric{}
	if err := g.Write(m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

func counter(c prometheus.Counter) float64 {
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// always is the annotation of ClusterObjectSets the tests externalize whatever their size.
var always = b.WithAnnotations(map[string]string{cosadmission.Annotation: string(cosadmission.ModeAlways)})

// externalized returns a ClusterObjectSet named app with n inline ConfigMaps named prefix-i
// (externalize: always), its stored form of refs to Secrets in the default system namespace, and its
// first Secret.
func externalized(t *testing.T, prefix string, n int) (inline, stored *olmv1.ClusterObjectSet, secret *corev1.Secret) {
	t.Helper()
	const ns = olmv1.DefaultSystemNamespace
	inline = b.COS("app", always, b.WithPhase("configuration", b.InlineConfigMaps("default", prefix, n)...))
	plan, err := content.PlanFor(inline.Name, cosadmission.PlanInput(inline), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stored = inline.DeepCopy()
	stored.Spec.Phases = cosadmission.WithRefs(inline.Spec.Phases, plan, ns)
	return inline, stored, secretdata.ObjectDataSecret(inline.Name, ns, plan.Secrets[0])
}

// request is the admission request of op on obj (raw when obj is nil), an update of old when it is
// set.
func request(t *testing.T, op admissionv1.Operation, obj *olmv1.ClusterObjectSet, raw string, old *olmv1.ClusterObjectSet) admission.Request {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Object: runtime.RawExtension{Raw: rawOf(t, obj, raw)}}}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: rawOf(t, old, "")}
	}
	return req
}

func rawOf(t *testing.T, obj *olmv1.ClusterObjectSet, raw string) []byte {
	t.Helper()
	if obj == nil {
		return []byte(raw)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
