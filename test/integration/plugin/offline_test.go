package plugin_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestBuildExternalizeEqualsTheWebhook: kubectl cos build --externalize prints, offline, the Secrets
// and the refs the webhook stores for the same inline ClusterObjectSet, byte for byte; and applying
// that output (Secrets, then the ClusterObjectSet of refs) through the webhook changes nothing: the
// refs are stored as sent, no other Secret is written, the reconciler takes them over, and applying
// it again (a GitOps sync) passes the Secret guard and changes nothing. The inline form goes to the
// webhook archived (its lifecycleState is all that differs from the build's), so that only the
// offline output rolls the ten CRDs out and tears them down.
func TestBuildExternalizeEqualsTheWebhook(t *testing.T) {
	t.Parallel() // with the package's other parallel tests: the only one of them with these CRDs
	dir, err := builders.BundleDir("prometheus-operator-crds")
	if err != nil {
		t.Fatal(err)
	}
	const name = "offline-prometheus"
	testenv.Env.RemoveWithSecretsAfter(t, name)
	args := []string{"build", dir, "--name", name, "--revision", "1", "-n", "monitoring", "--system-namespace", testenv.SystemNamespace}
	inline := decodeCOS(t, mustPlugin(t, args...).stdout)
	inline.Spec.LifecycleState = olmv1.LifecycleStateArchived
	offline := mustPlugin(t, append(args, "--externalize=oversized")...)
	if !strings.Contains(offline.stderr, "offline: nothing written") {
		t.Errorf("stderr: %s", offline.stderr)
	}
	docs := strings.Split(offline.stdout, "---\n")
	var secrets []corev1.Secret
	for _, d := range docs[:len(docs)-1] {
		var s corev1.Secret
		if err := yaml.Unmarshal([]byte(d), &s); err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, s)
	}
	refs := decodeCOS(t, docs[len(docs)-1])
	if len(secrets) == 0 {
		t.Fatalf("no Secrets printed:\n%.2000s", offline.stdout)
	}

	// The webhook's, for the inline form.
	testenv.MustKubectl(t, nil, "apply", "--server-side", "-f", writeFile(t, inline))
	byWebhook := getCOS(t, name)
	webhookSecrets := unowned(viewOf(testenv.Env.WaitOwned(t, name)))
	archivedRefs := refs.Spec.DeepCopy()
	archivedRefs.LifecycleState = olmv1.LifecycleStateArchived
	if diff := cmp.Diff(&byWebhook.Spec, archivedRefs); diff != "" {
		t.Errorf("the specs differ (-webhook +offline):\n%.3000s", diff)
	}
	if diff := cmp.Diff(webhookSecrets, viewOf(secrets)); diff != "" {
		t.Errorf("the Secrets differ (-webhook +offline):\n%.3000s", diff)
	}
	testenv.Env.DeleteWithSecrets(t, name)

	// The offline output applied as a GitOps tool would: the webhook passes the refs through.
	file := writeText(t, t.TempDir(), "offline.yaml", offline.stdout)
	testenv.MustKubectl(t, nil, "apply", "--server-side", "-f", file)
	stored := getCOS(t, name)
	if diff := cmp.Diff(refs.Spec, stored.Spec); diff != "" {
		t.Errorf("the stored spec is not the one sent (-sent +stored):\n%.3000s", diff)
	}
	if diff := cmp.Diff(webhookSecrets, unowned(viewOf(testenv.Env.WaitOwned(t, name)))); diff != "" {
		t.Errorf("the Secrets after applying the offline output (-webhook +applied):\n%.3000s", diff)
	}
	testenv.Env.WaitForCondition(t, name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	// A GitOps tool applies it again at every sync.
	testenv.MustKubectl(t, nil, "apply", "--server-side", "-f", file)
	if diff := cmp.Diff(stored.Spec, getCOS(t, name).Spec); diff != "" {
		t.Errorf("the spec changed on a second apply (-first +second):\n%.3000s", diff)
	}
}

// unowned is secrets without their owners, which the reconciler adds once the ClusterObjectSet exists.
func unowned(secrets []secretView) []secretView {
	for i := range secrets {
		secrets[i].Owners = nil
	}
	return secrets
}
