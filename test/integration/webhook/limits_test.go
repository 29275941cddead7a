package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// setDeadlineMinimum changes the served CRD's minimum of spec.progressDeadlineMinutes, as upstream's
// e2e suite does to test deadlines.
func setDeadlineMinimum(t *testing.T, minimum int) {
	t.Helper()
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/progressDeadlineMinutes/minimum","value":%d}]`, minimum)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: webhook.CRDName}}
	if err := testenv.Env.Client.Patch(context.Background(), crd, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// createWithDeadline creates (dry run unless real) a small inline ClusterObjectSet with the deadline.
func createWithDeadline(name string, minutes int32, real bool) error {
	cos := builders.COS(name, builders.WithProgressDeadline(minutes),
		builders.WithPhase("configuration", builders.Inline(builders.ConfigMap("default", name, map[string]string{"a": "b"}))))
	var opts []client.CreateOption
	if !real {
		opts = append(opts, client.DryRunAll)
	}
	return testenv.Env.Client.Create(context.Background(), cos, opts...)
}

// TestServedCRDBoundsApply lowers the CRD's minimum progress deadline: the webhooks follow the served
// CRD (within their 10-second reading of it) instead of refusing with the generated bound.
func TestServedCRDBoundsApply(t *testing.T) {
	const name = "served-bounds"
	removeAfter(t, name)
	err := createWithDeadline(name, 1, false)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.progressDeadlineMinutes") {
		t.Fatalf("a 1-minute deadline under the generated CRD: want Invalid at spec.progressDeadlineMinutes, got %v", err)
	}

	setDeadlineMinimum(t, 1)
	t.Cleanup(func() {
		setDeadlineMinimum(t, olmv1.MinProgressDeadlineMinutes)
		// Leave the cluster as found: until the webhooks and the API server refuse 1 minute again.
		waitUntil(t, "a 1-minute deadline to be refused again", func() (bool, string) {
			err := createWithDeadline(name+"-x", 1, false)
			return apierrors.IsInvalid(err), fmt.Sprint(err)
		})
	})
	waitUntil(t, "a 1-minute deadline to be admitted", func() (bool, string) {
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

// waitUntil polls cond every 200 ms for up to two minutes.
func waitUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
	}
}
