package plugin_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestInspectShowsTheAPIsCause: a ClusterObjectSet whose ConfigMap is in a namespace that does not
// exist retries with the reconciler's redacted condition (NotFound (404)); inspect shows the API's
// cause with the names (namespaces "…" not found) from a dry run of the phase, and no content.
func TestInspectShowsTheAPIsCause(t *testing.T) {
	const name, ns = "inspect-cause", "inspect-cause-missing"
	testenv.Env.RemoveWithSecretsAfter(t, name)
	cos := builders.COS(name, builders.WithPhase("configuration",
		builders.Inline(builders.ConfigMap(ns, "c", map[string]string{"password": "TOP-SECRET"})),
		builders.Inline(builders.ConfigMap("default", "inspect-cause-fine", nil))))
	cos.Annotations = map[string]string{"cos-externalizer.io/externalize": "always"}
	if err := c().Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	got := testenv.Env.WaitForCondition(t, name, olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonRetrying)
	out := squeeze(mustPlugin(t, "inspect", name).stdout)
	for _, s := range []string{
		`Causes (the reconciler retries: the API server refused an object of phase configuration; a server-side dry run of its 2 objects as you, nothing written):`,
		`v1 ConfigMap inspect-cause-missing/c: NotFound (404): namespaces "inspect-cause-missing" not found`,
	} {
		if !strings.Contains(out, s) {
			t.Errorf("inspect lacks %q:\n%s\n(condition: %v)", s, out, got.Status.Conditions)
		}
	}
	if strings.Contains(out, "inspect-cause-fine:") || strings.Contains(out, "TOP-SECRET") {
		t.Errorf("inspect shows a cause of the object that passes, or content:\n%s", out)
	}
}
