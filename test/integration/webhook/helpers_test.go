package webhook_test

import (
	"context"
	"fmt"
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

// stopManager stops the package's manager. The returned restore stops whichever manager runs then
// and starts the package's again; it runs when the test ends unless called before.
func stopManager(t *testing.T) (restore func()) {
	t.Helper()
	if err := manager.Stop(); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		if err := manager.Stop(); err != nil {
			t.Error(err)
		}
		m, err := testenv.Env.StartManager(context.Background(), "--rollout=false")
		if err != nil {
			t.Errorf("starting the manager again: %v", err)
			return
		}
		manager = m
	}
	t.Cleanup(restore)
	return restore
}

// withManager runs a manager with the package's flags and args in place of the package's manager,
// until restore (stopManager).
func withManager(t *testing.T, args ...string) (restore func()) {
	t.Helper()
	restore = stopManager(t)
	m, err := testenv.Env.StartManager(context.Background(), append([]string{"--rollout=false"}, args...)...)
	if err != nil {
		t.Fatalf("starting the manager: %v", err)
	}
	manager = m
	return restore
}

// systemSecrets lists the Secrets of the system namespace by name, narrowed by opts.
func systemSecrets(t *testing.T, opts ...client.ListOption) map[string]bool {
	t.Helper()
	list := &corev1.SecretList{}
	if err := testenv.Env.Client.List(context.Background(), list, append([]client.ListOption{client.InNamespace(testenv.SystemNamespace)}, opts...)...); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range list.Items {
		names[s.Name] = true
	}
	return names
}

// secretNames lists the object-data Secrets of the system namespace by name.
func secretNames(t *testing.T) map[string]bool {
	t.Helper()
	return systemSecrets(t, client.HasLabels{olmv1.LabelRevisionName})
}

// added returns the names of now that are not in before, sorted. Secrets of earlier tests may
// disappear meanwhile (the garbage collector, the sweep): only additions count.
func added(before, now map[string]bool) []string {
	var names []string
	for name := range now {
		if !before[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// written returns the object-data Secrets that exist now and did not before, sorted.
func written(t *testing.T, before map[string]bool) []string {
	t.Helper()
	return added(before, secretNames(t))
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

// checkUnwritten checks that what wrote neither stored (its resourceVersion) nor its Secrets (their
// resourceVersions, secrets: settledSecrets).
func checkUnwritten(t *testing.T, what string, stored *olmv1.ClusterObjectSet, secrets map[string]string) {
	t.Helper()
	if again := getCOS(t, stored.Name); again.ResourceVersion != stored.ResourceVersion {
		t.Errorf("%s changed the ClusterObjectSet: resourceVersion %s -> %s", what, stored.ResourceVersion, again.ResourceVersion)
	}
	checkSecretsUnwritten(t, what, stored.Name, secrets)
}

// checkSecretsUnwritten checks that what wrote none of the Secrets of the ClusterObjectSet name
// (their resourceVersions, secrets: settledSecrets).
func checkSecretsUnwritten(t *testing.T, what, name string, secrets map[string]string) {
	t.Helper()
	if after := testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, name)); fmt.Sprint(after) != fmt.Sprint(secrets) {
		t.Errorf("%s changed the Secrets: %v -> %v", what, secrets, after)
	}
}
