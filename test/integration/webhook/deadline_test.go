package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/deadline"
)

// TestCallDeadlineRefusesAtOnce: a ClusterObjectSet the webhook cannot finish before the API
// server's deadline for its call is refused with a retryable 429 that says why and when to retry,
// before anything is written; a small one beside the same work is admitted. The manager's queue of
// work runs on a stopped fake clock at a rate of 0.5 MB a second on one core, with work of its own in
// flight that never ends, so each verdict is a matter of sizes alone: the large one (about 8 MB of
// charge) would take 32 s sharing the core, past the 15 s timeout the API server gives the mutating
// webhook, less the 3 s margin; the small one 0.1 s at most.
func TestCallDeadlineRefusesAtOnce(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	work := deadline.New(clk, deadline.Options{Cores: 1, Rate: 0.5e6, Margin: 3 * time.Second})
	if _, d := work.Admit(1<<40, clk.Now().Add(time.Hour)); !d.Admitted {
		t.Fatal("the work in flight was refused")
	}
	restore := stopManager(t)
	defer restore()
	m, err := testenv.Env.StartManagerWith(ctx, func(o *app.Options) { o.AdmissionWork = work }, "--rollout=false")
	if err != nil {
		t.Fatalf("starting the manager: %v", err)
	}
	manager = m

	// The refusal metric is the process's: other tests' managers count into it too.
	refusals := func() float64 {
		t.Helper()
		metrics, err := testenv.ScrapeMetrics(ctx, manager.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		n, err := testenv.SumMetric(strings.NewReader(metrics), "cos_externalizer_admission_refusals_total{", `reason="`+string(admission.ReasonDeadline)+`"`)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := refusals()

	const large, small = "deadline-large", "deadline-small"
	testenv.Env.RemoveAfter(t, large, small)
	// 25 ConfigMaps of 100 KB: about 2.5 MB.
	var objs []olmv1.ClusterObjectSetObject
	for i := range 25 {
		objs = append(objs, builders.Inline(builders.ConfigMap("default", fmt.Sprintf("%s-%d", large, i), map[string]string{"letters": strings.Repeat(string(rune('a'+i)), 100<<10)})))
	}
	err = createOnce(ctx, t, builders.COS(large, builders.WithPhase("config", objs...)))
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("the large ClusterObjectSet: want 429 TooManyRequests, got %v", err)
	}
	for _, want := range []string{
		`admission webhook "externalize.cos-externalizer.io" denied the request`,
		"the webhook cannot finish this ClusterObjectSet in time: it would finish in ",
		// The API server's 15 s timeout of the call, less the margin: the timeout parameter was read.
		"where the API server's deadline for this call, less a margin, leaves 12.0 s",
		"retry, nothing was written",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if after, ok := apierrors.SuggestsClientDelay(err); !ok || after < 1 || after > 15 {
		t.Errorf("Retry-After %d (%t), want 1-15 s", after, ok)
	}
	if secrets := testenv.Env.ObjectDataSecrets(t, large); len(secrets) > 0 {
		t.Errorf("%d Secrets written for the refused ClusterObjectSet", len(secrets))
	}
	if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Name: large}, &olmv1.ClusterObjectSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused ClusterObjectSet: want NotFound, got %v", err)
	}

	small1 := builders.COS(small, builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		builders.WithPhase("config", builders.InlineConfigMaps("default", small, 2)...))
	if err := createOnce(ctx, t, small1); err != nil {
		t.Fatalf("the small ClusterObjectSet beside the same work: %v", err)
	}
	if got := getCOS(t, small); !got.Spec.Phases[0].Objects[0].IsRef() {
		t.Error("the small ClusterObjectSet was not externalized")
	}

	if n := refusals() - before; n != 1 {
		t.Errorf("refusals for the deadline: %v, want 1", n)
	}
}

// createOnce creates c with no retry: client-go would retry a 429 after its Retry-After by itself.
func createOnce(ctx context.Context, t *testing.T, c *olmv1.ClusterObjectSet) error {
	t.Helper()
	c.APIVersion, c.Kind = olmv1.GroupVersion.String(), olmv1.ClusterObjectSetKind
	body, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Env.Clientset.CoreV1().RESTClient().Post().AbsPath("/apis/olm.operatorframework.io/v1/clusterobjectsets").
		SetHeader("Content-Type", "application/json").Body(body).MaxRetries(0).Do(ctx).Error()
}
