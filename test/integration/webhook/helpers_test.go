package webhook_test

import (
	"context"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// kubectl and mustKubectl run the control plane's kubectl against the test cluster.
var kubectl, mustKubectl = testenv.Kubectl, testenv.MustKubectl

// writeJSON writes obj as a JSON file for kubectl -f (testenv.WriteJSON).
func writeJSON(t *testing.T, obj any) string { return testenv.WriteJSON(t, obj, "cos.json") }

// secretNames lists the object-data Secrets of the system namespace by name.
func secretNames(t *testing.T) map[string]bool {
	t.Helper()
	list := &corev1.SecretList{}
	if err := testenv.Env.Client.List(context.Background(), list, client.InNamespace(testenv.SystemNamespace),
		client.HasLabels{olmv1.LabelRevisionName}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range list.Items {
		names[s.Name] = true
	}
	return names
}

// written returns the object-data Secrets that exist now and did not before, sorted. Secrets of
// earlier tests may disappear meanwhile (the garbage collector, the sweep): only new ones count.
func written(t *testing.T, before map[string]bool) []string {
	t.Helper()
	var added []string
	for name := range secretNames(t) {
		if !before[name] {
			added = append(added, name)
		}
	}
	sort.Strings(added)
	return added
}

func getCOS(t *testing.T, name string) *olmv1.ClusterObjectSet {
	t.Helper()
	got := &olmv1.ClusterObjectSet{}
	if err := testenv.Env.Client.Get(context.Background(), client.ObjectKey{Name: name}, got); err != nil {
		t.Fatalf("getting ClusterObjectSet %s: %v", name, err)
	}
	return got
}

func cosExists(t *testing.T, name string) bool {
	t.Helper()
	err := testenv.Env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &olmv1.ClusterObjectSet{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// settledSecrets waits until every object-data Secret of cos is owned by it (the reconciler's Secret
// ownership runs even in webhook-only mode), then returns their resourceVersions.
func settledSecrets(t *testing.T, cos *olmv1.ClusterObjectSet) map[string]string {
	t.Helper()
	framework.Eventually(context.Background(), t, "the Secrets of "+cos.Name+" to be owned by it", func(context.Context) (bool, string) {
		for _, s := range testenv.Env.ObjectDataSecrets(t, cos.Name) {
			if ref := metav1.GetControllerOf(&s); ref == nil || ref.UID != cos.UID {
				return false, "Secret " + s.Name + " not owned yet"
			}
		}
		return true, ""
	})
	return testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, cos.Name))
}
