package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// setDeadlineMinimum changes the served CRD's minimum of spec.progressDeadlineMinutes, as upstream's
// e2e suite does to test deadlines.
func setDeadlineMinimum(t *testing.T, minimum int) { setDeadlineBound(t, "minimum", minimum) }

// setDeadlineBound changes the served CRD's minimum or maximum of spec.progressDeadlineMinutes.
func setDeadlineBound(t *testing.T, bound string, v int) {
	t.Helper()
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/progressDeadlineMinutes/%s","value":%d}]`, bound, v)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: webhook.CRDName}}
	if err := testenv.Env.Client.Patch(context.Background(), crd, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// createWithDeadline creates (dry run unless stored) a small inline ClusterObjectSet with the deadline.
func createWithDeadline(name string, minutes int32, stored bool, with ...builders.Option) error {
	cos := builders.COS(name, append([]builders.Option{builders.WithProgressDeadline(minutes),
		builders.WithPhase("configuration", builders.Inline(builders.ConfigMap("default", name, map[string]string{"a": "b"})))}, with...)...)
	var opts []client.CreateOption
	if !stored {
		opts = append(opts, client.DryRunAll)
	}
	return testenv.Env.Client.Create(context.Background(), cos, opts...)
}

// lowerDeadlineMinimum lowers the served CRD's minimum progress deadline to 1 until the test ends,
// and then leaves the cluster as found: until the webhooks and the API server refuse 1 minute again
// (probed with dry runs named after name).
func lowerDeadlineMinimum(t *testing.T, name string) {
	t.Helper()
	setDeadlineMinimum(t, 1)
	t.Cleanup(func() {
		setDeadlineMinimum(t, olmv1.MinProgressDeadlineMinutes)
		framework.Eventually(context.Background(), t, "a 1-minute deadline to be refused again", func(ctx context.Context) (bool, string) {
			err := createWithDeadline(name+"-x", 1, false)
			return apierrors.IsInvalid(err), fmt.Sprint(err)
		})
	})
}

// TestServedCRDBoundsApply lowers the CRD's minimum progress deadline: the webhooks follow the served
// CRD (within their 10-second reading of it) instead of refusing with the generated bound.
func TestServedCRDBoundsApply(t *testing.T) {
	const name = "served-bounds"
	testenv.Env.RemoveAfter(t, name)
	err := createWithDeadline(name, 1, false)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.progressDeadlineMinutes") {
		t.Fatalf("a 1-minute deadline under the generated CRD: want Invalid at spec.progressDeadlineMinutes, got %v", err)
	}

	lowerDeadlineMinimum(t, name)
	framework.Eventually(context.Background(), t, "a 1-minute deadline to be admitted", func(ctx context.Context) (bool, string) {
		err := createWithDeadline(name, 1, false)
		return err == nil, fmt.Sprint(err)
	})
	if err := createWithDeadline(name, 1, true); err != nil {
		t.Fatalf("creating with the served bound: %v", err)
	}
	if got := getCOS(t, name); got.Spec.ProgressDeadlineMinutes != 1 {
		t.Errorf("stored deadline %d", got.Spec.ProgressDeadlineMinutes)
	}
}

// TestServedCRDBoundChangedJustNow is upstream's e2e scenario: the CRD's minimum progress deadline is
// lowered and a ClusterObjectSet using it applied at once, within the webhooks' 10-second reading of
// the CRD. The webhooks confirm a refusal on a bound against the CRD read now, so they refuse nothing
// the API server admits. Raising the maximum is the same; lowering it again is refused (by the API
// server: the webhooks' reading is laxer for up to 10 seconds) and stores no ClusterObjectSet.
func TestServedCRDBoundChangedJustNow(t *testing.T) {
	const name, reverse = "served-bounds-now", "served-bounds-now-lowered"
	testenv.Env.RemoveAfter(t, name, reverse)
	// A refusal under the generated CRD: the webhooks' reading of it is fresh.
	if err := createWithDeadline(name, 1, false); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.progressDeadlineMinutes") {
		t.Fatalf("a 1-minute deadline under the generated CRD: want Invalid at spec.progressDeadlineMinutes, got %v", err)
	}

	lowerDeadlineMinimum(t, name)
	admittedByWebhooks(t, name, 1)
	if err := createWithDeadline(name, 1, true); err != nil {
		t.Fatalf("creating with the lowered minimum: %v", err)
	}
	if got := getCOS(t, name); got.Spec.ProgressDeadlineMinutes != 1 {
		t.Errorf("stored deadline %d", got.Spec.ProgressDeadlineMinutes)
	}

	const over = olmv1.MaxProgressDeadlineMinutes + 60
	if err := createWithDeadline(reverse, over, false); !apierrors.IsInvalid(err) {
		t.Fatalf("a %d-minute deadline under the generated CRD: want Invalid, got %v", over, err)
	}
	setDeadlineBound(t, "maximum", over)
	t.Cleanup(func() { setDeadlineBound(t, "maximum", olmv1.MaxProgressDeadlineMinutes) })
	admittedByWebhooks(t, reverse, over)

	// The webhooks now read the raised maximum; lowered again, the API server refuses as soon as it
	// serves the change, while the webhooks' reading is still the raised one.
	setDeadlineBound(t, "maximum", olmv1.MaxProgressDeadlineMinutes)
	framework.Eventually(context.Background(), t, fmt.Sprintf("a %d-minute deadline to be refused again", over), func(ctx context.Context) (bool, string) {
		err := createWithDeadline(reverse, over, false)
		return apierrors.IsInvalid(err), fmt.Sprint(err)
	})
	before := secretNames(t)
	err := createWithDeadline(reverse, over, true, builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.progressDeadlineMinutes") {
		t.Fatalf("a %d-minute deadline after the maximum was lowered again: want Invalid at spec.progressDeadlineMinutes, got %v", over, err)
	}
	if cosExists(t, reverse) {
		t.Errorf("ClusterObjectSet %s stored after its create was refused", reverse)
	}
	// The webhook, still reading the raised maximum, may have written the Secrets before the API server
	// refused: no ClusterObjectSet references them (the guard lets them be deleted), and the orphan
	// sweep deletes them after its grace period. Here, at once.
	for _, s := range written(t, before) {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: s}}
		if err := testenv.Env.Client.Delete(context.Background(), sec); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting Secret %s left by the refused create: %v", s, err)
		}
	}
}

// admittedByWebhooks creates (dry run) a ClusterObjectSet with the deadline right after a change of
// the CRD, until the API server admits it: its own CRD handler may take a moment to serve the
// change. A refusal by one of our webhooks fails the test at once.
func admittedByWebhooks(t *testing.T, name string, minutes int32) {
	t.Helper()
	framework.Eventually(context.Background(), t, fmt.Sprintf("a %d-minute deadline to be admitted", minutes), func(ctx context.Context) (bool, string) {
		err := createWithDeadline(name, minutes, false)
		if err != nil && strings.Contains(err.Error(), "admission webhook") {
			t.Fatalf("a %d-minute deadline refused by a webhook right after the CRD allowed it: %v", minutes, err)
		}
		return err == nil, fmt.Sprint(err)
	})
}
