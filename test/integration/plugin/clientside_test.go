package plugin_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// TestClientSideReapply: client-side kubectl apply of the same inline file again prints
// "configured" (kubectl's three-way patch of the inline file against the stored refs is never
// empty), yet changes nothing: generation, spec, annotations, status and Secrets stay; the
// resourceVersion moves at most once, for kubectl's managedFields entry, and stays on the next
// re-apply (docs/gitops.md). kubectl cos apply, which compares with the stored form, finds nothing
// to change.
func TestClientSideReapply(t *testing.T) {
	const name, ns = "client-side", "client-side"
	testenv.Env.RemoveWithSecretsAfter(t, name)
	// 50 objects of 4 KB: a spec over the webhook's 128 KiB threshold, so it is externalized and its
	// last-applied annotation rewritten to refs. Archived: only what is stored matters here.
	var objs []olmv1.ClusterObjectSetObject
	for i := range 50 {
		objs = append(objs, builders.Inline(builders.ConfigMap(ns, fmt.Sprintf("cm-%d", i), map[string]string{"data": strings.Repeat(fmt.Sprint(i%10), 4000)})))
	}
	file := writeFile(t, builders.COS(name, builders.WithLifecycleState(olmv1.LifecycleStateArchived), builders.WithPhase("configuration", objs...)))

	apply := func(what string) string {
		t.Helper()
		out, stderr, err := kubectlWithPlugin(t, "apply", "-f", file)
		if err != nil {
			t.Fatalf("%s: kubectl apply: %v\n%s%s", what, err, out, stderr)
		}
		return out
	}
	if out := apply("first apply"); !strings.Contains(out, "created") {
		t.Fatalf("first apply printed %q", out)
	}
	stored := getCOS(t, name)
	if admission.CountInline(stored.Spec.Phases) != 0 {
		t.Fatal("not externalized")
	}
	if v := stored.Annotations[admission.LastAppliedAnnotation]; strings.Contains(v, `"object":`) {
		t.Errorf("the last-applied annotation (%d bytes) still holds inline objects", len(v))
	}
	// Once the reconciler is done with it (its Secrets owned, its status written), nothing else
	// writes it.
	testenv.Env.WaitOwned(t, name)
	stored = testenv.Env.WaitForCondition(t, name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonArchived)
	secrets := testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, name))

	// The re-apply sends a patch (phases inline, the annotation inline) that the webhook undoes. The
	// API server then writes nothing but its managedFields: kubectl's entry gets the request's time
	// (in seconds) before admission, and when that moves it after another manager's entry (the
	// reconciler's status, written after the first apply), the API server's check that only
	// timestamps changed compares the entries pairwise and fails: one write, on the first re-apply
	// in a later second than the status write. Once kubectl's entry is the latest, re-applies write
	// nothing at all. So: at most one write, and none after it.
	writes := 0
	for i := 1; i <= 4; i++ {
		what := fmt.Sprintf("re-apply %d", i)
		if out := apply(what); !strings.Contains(out, "clusterobjectset.olm.operatorframework.io/"+name+" configured") {
			t.Errorf("%s printed %q; docs/gitops.md says configured", what, out)
		}
		again := getCOS(t, name)
		if again.Generation != stored.Generation {
			t.Errorf("%s changed the generation: %d -> %d", what, stored.Generation, again.Generation)
		}
		if diff := cmp.Diff(stored, again, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion", "ManagedFields")); diff != "" {
			t.Errorf("%s changed the ClusterObjectSet (-before +after):\n%s", what, diff)
		}
		if after := testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, name)); fmt.Sprint(after) != fmt.Sprint(secrets) {
			t.Errorf("%s wrote Secrets: %v -> %v", what, secrets, after)
		}
		wrote := again.ResourceVersion != stored.ResourceVersion
		if wrote {
			writes++
		}
		if writes > 1 {
			t.Fatalf("%s wrote the ClusterObjectSet again: resourceVersion %s -> %s\nbefore: %s\nafter:  %s",
				what, stored.ResourceVersion, again.ResourceVersion, metadataOf(t, stored), metadataOf(t, again))
		}
		stored = again
		if !wrote && (writes == 1 || i >= 3) {
			break // after the one write, a re-apply wrote nothing (or none wrote in three)
		}
	}

	// kubectl cos apply computes its patch against the stored form: nothing to send.
	if r := mustPlugin(t, "apply", "-f", file); !strings.Contains(r.stdout, name+" unchanged") {
		t.Errorf("kubectl cos apply (client-side) printed %q, want unchanged", r.stdout)
	}
	if last := getCOS(t, name); last.ResourceVersion != stored.ResourceVersion {
		t.Errorf("kubectl cos apply wrote the ClusterObjectSet: resourceVersion %s -> %s", stored.ResourceVersion, last.ResourceVersion)
	}
}

// metadataOf is what a write may have changed of a ClusterObjectSet, for a failure's message: its
// metadata (the last-applied annotation cut short) and its conditions.
func metadataOf(t *testing.T, c *olmv1.ClusterObjectSet) string {
	t.Helper()
	m := c.ObjectMeta.DeepCopy()
	if v, ok := m.Annotations[admission.LastAppliedAnnotation]; ok {
		m.Annotations[admission.LastAppliedAnnotation] = fmt.Sprintf("%.300s... (%d bytes)", v, len(v))
	}
	b, err := json.Marshal(struct {
		Metadata   *metav1.ObjectMeta `json:"metadata"`
		Conditions []metav1.Condition `json:"conditions"`
	}{m, c.Status.Conditions})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
