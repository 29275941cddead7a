package plugin_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestInspectPrometheusOperator: inspect of the rolled-out prometheus-operator ClusterObjectSet
// lists every object by kind and name, verifies the digest of every ref and the phase's latched
// digest, shows the Secret as immutable and owned, and the Events; -o yaml prints the resolved
// inline form, equal to what was applied.
func TestInspectPrometheusOperator(t *testing.T) {
	const name = "inspect-prometheus"
	testenv.Env.RemoveWithSecretsAfter(t, name)
	want, err := builders.Bundle(name, "prometheus-operator-crds", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	mustPlugin(t, "apply", "-f", writeFile(t, want), "--server-side")
	testenv.Env.WaitForCondition(t, name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	secrets := testenv.Env.WaitOwned(t, name)

	var out string
	framework.Eventually(ctx, t, "inspect to show the Succeeded Event", func(ctx context.Context) (bool, string) {
		out = squeeze(mustPlugin(t, "inspect", name).stdout)
		return strings.Contains(out, "Normal Succeeded every phase is rolled out and ready"), out
	})
	for _, o := range want.Spec.Phases[0].Objects {
		line := lineWith(out, "CustomResourceDefinition "+o.Object.GetName()+" ")
		if line == "" || !strings.Contains(line, "digest verified;") || !strings.Contains(line, "gzip") {
			t.Errorf("object %s: line %q", o.Object.GetName(), line)
		}
	}
	if n := strings.Count(out, "digest verified;"); n != 10 {
		t.Errorf("%d digests verified, want 10", n)
	}
	for _, s := range []string{
		"Revision: 1, Active, collision protection Prevent",
		"Current phase: none: all 1 phases have rolled out",
		"Progressing True Succeeded Revision has rolled out.",
		"Available True ProbesSucceeded Objects are available and pass all probes.",
		"1. crds: 10 objects, completed ",
		"; digest matches the content",
		testenv.SystemNamespace + "/" + secrets[0].Name + ": exists, immutable, type olm.operatorframework.io/object-data, owner ClusterObjectSet " + name + " (this one), 10 keys",
		"Orphaned Secrets:\n none",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("inspect lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "MISMATCH") || strings.Contains(out, "openAPIV3Schema") {
		t.Errorf("inspect shows a mismatch or content:\n%s", out)
	}

	resolved := decodeCOS(t, mustPlugin(t, "inspect", name, "-o", "yaml").stdout)
	if diff := cmp.Diff(want.Spec.Phases, resolved.Spec.Phases); diff != "" {
		t.Errorf("-o yaml is not the applied inline form (-applied +resolved):\n%.2000s", diff)
	}
	if resolved.Status.Conditions == nil {
		t.Error("-o yaml has no status")
	}
}

// TestInspectShowsProblems: a ref whose Secret's content was replaced, and a Secret missing, are
// shown, and every other part still prints.
func TestInspectShowsProblems(t *testing.T) {
	const name = "inspect-problems"
	testenv.Env.RemoveWithSecretsAfter(t, name)
	testenv.Env.EnsureNamespace(t, "inspect-problems")
	tampered := &corev1.Secret{}
	tampered.Namespace, tampered.Name = "inspect-problems", "tampered"
	tampered.Type = olmv1.SecretTypeObjectData
	// A content key whose bytes hash to something else.
	const key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	tampered.Data = map[string][]byte{key: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"},"data":{"secret":"TOP-SECRET"}}`)}
	if err := c().Create(ctx, tampered); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	cos := builders.COS(name, builders.WithPhase("configuration",
		builders.Ref("tampered", "inspect-problems", key),
		builders.Ref("missing", "inspect-problems", "k"),
		builders.Inline(builders.ConfigMap("default", "inline-one", nil))))
	if err := c().Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	out := squeeze(mustPlugin(t, "inspect", name).stdout)
	for _, s := range []string{
		"(not resolved) tampered key AAAAAAAAAA… DIGEST MISMATCH: the content does not hash to its key; 115 B stored",
		"(not resolved) missing key k the Secret does not exist",
		"ConfigMap default/inline-one",
		"inspect-problems/tampered: exists, MUTABLE, type olm.operatorframework.io/object-data",
		"! not immutable: the reconciler refuses it (Blocked)",
		"inspect-problems/missing: MISSING",
		"Events:",
		"Orphaned Secrets:",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("inspect lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "TOP-SECRET") {
		t.Errorf("inspect shows Secret content:\n%s", out)
	}
	r := plugin(t, "inspect", name, "-o", "yaml")
	if r.err == nil || !strings.Contains(r.err.Error(), `phase "configuration" object 0`) || strings.Contains(r.err.Error(), "TOP-SECRET") {
		t.Errorf("-o yaml of an unresolvable ClusterObjectSet: %v", r.err)
	}

	gone := plugin(t, "inspect", "does-not-exist")
	if gone.err == nil || !strings.Contains(squeeze(gone.stdout), `ClusterObjectSet: cannot be read: clusterobjectsets.olm.operatorframework.io "does-not-exist" not found`) ||
		!strings.Contains(gone.stdout, "Orphaned Secrets:\n  none") {
		t.Errorf("inspect of a missing ClusterObjectSet: %v\n%s", gone.err, gone.stdout)
	}
}

var spaces = regexp.MustCompile(`[ \t]+`)

// squeeze makes every run of spaces one space (the report's columns are aligned with spaces).
func squeeze(s string) string { return spaces.ReplaceAllString(s, " ") }

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
