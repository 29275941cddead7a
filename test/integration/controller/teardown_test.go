package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestDeletingRightAfterRolloutRemovesCRDs deletes a revision of ten CRDs of one group as soon as it
// has rolled out, three times over. The API server's cleanup of a CRD deleted that early can fail
// ("storage is (re)initializing") and then, by a lost wake-up, wait for its informer's resync,
// minutes later; teardown re-triggers such a cleanup, so each round ends well within the wait.
// Whether the API server stalls in a round is up to it: the re-triggers seen are logged.
func TestDeletingRightAfterRolloutRemovesCRDs(t *testing.T) {
	const group = "teardown.cos-test.io"
	kinds := []string{"Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India", "Juliett"}
	var objs []olmv1.ClusterObjectSetObject
	for _, k := range kinds {
		objs = append(objs, builders.Inline(builders.CRD(group, k)))
	}
	for round := range 3 {
		name := fmt.Sprintf("crd-teardown-%d", round)
		create(t, builders.COS(name, builders.WithPhase("crds", objs...)))
		got := testenv.Env.WaitForCondition(t, name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
		if err := c().Delete(ctx, got); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(ctx, t, fmt.Sprintf("round %d: %s and its CRDs to be gone", round, name), func(ctx context.Context) (bool, string) {
			var left []string
			if err := c().Get(ctx, client.ObjectKey{Name: name}, &olmv1.ClusterObjectSet{}); !apierrors.IsNotFound(err) {
				left = append(left, "the ClusterObjectSet")
			}
			crds := &apiextensionsv1.CustomResourceDefinitionList{}
			if err := c().List(ctx, crds); err != nil {
				return false, err.Error()
			}
			for _, crd := range crds.Items {
				if crd.Spec.Group == group {
					left = append(left, fmt.Sprintf("%s (conditions %v)", crd.Name, crd.Status.Conditions))
				}
			}
			return len(left) == 0, strings.Join(left, ", ")
		})
	}
	events := &eventsv1.EventList{}
	if err := c().List(ctx, events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == controllers.EventCRDCleanupRetriggered {
			if e.Type != "Warning" || e.Related == nil || !strings.HasSuffix(e.Related.Name, "."+group) {
				t.Errorf("event %s %s regarding %s related %v: want a Warning related to the CRD", e.Type, e.Reason, e.Regarding.Name, e.Related)
			}
			t.Logf("%s: %s", e.Regarding.Name, e.Note)
		}
	}
}
