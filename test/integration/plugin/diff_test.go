package plugin_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

func secretObject(ns, name, value string) *unstructured.Unstructured {
	u := builders.ConfigMap(ns, name, nil)
	u.SetKind("Secret")
	u.Object["data"] = map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(value))}
	return u
}

// exitCode is the exit status a kubectl cos run ends with.
func exitCode(err error) int {
	var exit *commands.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	}
	return -1
}

// TestDiff compares two stored revisions object by object on their resolved content, and a file
// with the stored ClusterObjectSet of its name; Secret values are masked unless asked for, and
// KUBECTL_EXTERNAL_DIFF is honoured.
func TestDiff(t *testing.T) {
	const ns = "diff"
	testenv.Env.RemoveWithSecretsAfter(t, "diff-a", "diff-b")
	// Archived: nothing is rolled out, only the stored content matters here.
	revision := func(name string, rev int64, setting, password string, extra string) *olmv1.ClusterObjectSet {
		objs := []olmv1.ClusterObjectSetObject{
			builders.Inline(builders.ConfigMap(ns, "settings", map[string]string{"k": setting})),
			builders.Inline(secretObject(ns, "creds", password)),
			builders.Inline(builders.ConfigMap(ns, extra, nil)),
		}
		return builders.COS(name, builders.WithRevision(rev), builders.WithLifecycleState(olmv1.LifecycleStateArchived),
			builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
			builders.WithPhase("configuration", objs...))
	}
	a := revision("diff-a", 1, "one", "old-password", "removed")
	b := revision("diff-b", 2, "two", "new-password", "added")
	fileB := writeFile(t, b)
	mustPlugin(t, "apply", "-f", writeFile(t, a))
	mustPlugin(t, "apply", "-f", fileB)
	if admission.CountInline(getCOS(t, "diff-b").Spec.Phases) != 0 {
		t.Fatal("diff-b was not externalized")
	}

	r := plugin(t, "diff", "diff-a", "diff-b")
	if exitCode(r.err) != 1 {
		t.Fatalf("diff of two revisions: exit %d (%v), want 1\n%s\n%s", exitCode(r.err), r.err, r.stdout, r.stderr)
	}
	for _, s := range []string{
		"-  revision: 1", "+  revision: 2",
		"diff-a/ConfigMap.diff.settings.yaml", "-  k: one", "+  k: two",
		"diff-a/ConfigMap.diff.removed.yaml", "-  name: removed",
		"diff-b/ConfigMap.diff.added.yaml", "+  name: added",
		"-  password: '*** (before)'", "+  password: '*** (after)'",
	} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("diff lacks %q:\n%s", s, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "kubectl-cos: 3 changed, 1 added, 1 removed, 0 unchanged") {
		t.Errorf("summary: %s", r.stderr)
	}
	for _, secret := range []string{"old-password", "new-password", base64.StdEncoding.EncodeToString([]byte("old-password"))} {
		if strings.Contains(r.stdout, secret) {
			t.Errorf("diff shows a Secret value %q", secret)
		}
	}
	if r := plugin(t, "diff", "diff-a", "diff-b", "--show-secret"); !strings.Contains(r.stdout, "+  password: "+base64.StdEncoding.EncodeToString([]byte("new-password"))) {
		t.Errorf("--show-secret does not show the value:\n%s", r.stdout)
	}

	// The inline file against its stored, externalized form: the same content.
	if r := plugin(t, "diff", "-f", fileB); r.err != nil || r.stdout != "" || !strings.Contains(r.stderr, "0 changed, 0 added, 0 removed, 4 unchanged") {
		t.Errorf("diff -f of the applied file: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
	changed := b.DeepCopy()
	changed.Spec.Phases[0].Objects[0] = builders.Inline(builders.ConfigMap(ns, "settings", map[string]string{"k": "three"}))
	r = plugin(t, "diff", "-f", writeFile(t, changed))
	if exitCode(r.err) != 1 || !strings.Contains(r.stdout, "live/ConfigMap.diff.settings.yaml") || !strings.Contains(r.stdout, "+  k: three") {
		t.Errorf("diff -f of a changed file: %v\n%s", r.err, r.stdout)
	}
	// A file of a ClusterObjectSet that is not stored: everything is new.
	absent := b.DeepCopy()
	absent.Name = "diff-not-stored"
	if r := plugin(t, "diff", "-f", writeFile(t, absent)); exitCode(r.err) != 1 || !strings.Contains(r.stderr, "0 changed, 4 added") {
		t.Errorf("diff -f of a ClusterObjectSet not stored: %v\n%s", r.err, r.stderr)
	}

	t.Setenv("KUBECTL_EXTERNAL_DIFF", "diff -q")
	r = plugin(t, "diff", "diff-a", "diff-b")
	if exitCode(r.err) != 1 || !strings.Contains(r.stdout, "Files ") || strings.Contains(r.stdout, "@@") {
		t.Errorf("with KUBECTL_EXTERNAL_DIFF=diff -q: %v\n%s", r.err, r.stdout)
	}
	t.Setenv("KUBECTL_EXTERNAL_DIFF", "diff --label=$(reboot)")
	if r = plugin(t, "diff", "diff-a", "diff-b"); r.err == nil || !strings.Contains(r.err.Error(), "is not allowed") {
		t.Errorf("a KUBECTL_EXTERNAL_DIFF argument with other characters: %v", r.err)
	}
}
