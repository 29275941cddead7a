package cos

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// run runs kubectl cos offline with stdin and returns stdout, stderr and the error.
func run(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestBuildMissingNamespaces(t *testing.T) {
	const (
		deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: app}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}}}\n"
		sa     = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n"
		other  = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other}\n"
		ns     = "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n"
		inDef  = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n"
		crole  = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\n"
	)
	tests := map[string]struct {
		input    []string
		args     []string
		warnings []string
		// phases are "phase: Kind namespace/name ..." of the output.
		phases []string
	}{
		"namespace among the objects": {input: []string{ns, deploy, sa}, args: []string{"-n", "app"},
			phases: []string{"namespaces: Namespace /app", "identity: ServiceAccount app/sa", "deploy: Deployment app/d"}},
		"namespaces missing: warned": {input: []string{deploy, sa, other, crole}, args: []string{"-n", "app"},
			warnings: []string{
				"Warning: namespace app is not among the objects: unless it exists before the rollout, the objects in it fail with NotFound: ServiceAccount sa, Deployment d (--create-namespace adds it)",
				"Warning: namespace other is not among the objects: unless it exists before the rollout, the objects in it fail with NotFound: ConfigMap c (--create-namespace adds it)",
			},
			phases: []string{"identity: ServiceAccount app/sa", "configuration: ConfigMap other/c", "roles: ClusterRole /r", "deploy: Deployment app/d"}},
		"--create-namespace": {input: []string{deploy, sa, other}, args: []string{"-n", "app", "--create-namespace"},
			phases: []string{"namespaces: Namespace /app Namespace /other", "identity: ServiceAccount app/sa", "configuration: ConfigMap other/c", "deploy: Deployment app/d"}},
		"--create-namespace, one there": {input: []string{ns, deploy, other}, args: []string{"--create-namespace"},
			phases: []string{"namespaces: Namespace /app Namespace /other", "configuration: ConfigMap other/c", "deploy: Deployment app/d"}},
		"default needs none": {input: []string{inDef}, args: []string{"--create-namespace"},
			phases: []string{"configuration: ConfigMap default/c"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"build", "-", "--name", "x-1", "--revision", "1"}, tc.args...)
			out, errOut, err := run(t, strings.Join(tc.input, "---\n"), args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			var warnings []string
			for l := range strings.Lines(errOut) {
				warnings = append(warnings, strings.TrimSuffix(l, "\n"))
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			var c olmv1.ClusterObjectSet
			if err := yaml.Unmarshal([]byte(out), &c); err != nil {
				t.Fatal(err)
			}
			var phases []string
			for _, ph := range c.Spec.Phases {
				line := ph.Name + ":"
				for _, m := range ph.Objects {
					line += " " + m.Object.GetKind() + " " + m.Object.GetNamespace() + "/" + m.Object.GetName()
				}
				phases = append(phases, line)
			}
			if diff := cmp.Diff(tc.phases, phases); diff != "" {
				t.Errorf("phases (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListObjects(t *testing.T) {
	for want, objs := range map[string][]string{
		"a":                        {"a"},
		"a, b":                     {"a", "b"},
		"a, b, c, d, e and 2 more": {"a", "b", "c", "d", "e", "f", "g"},
	} {
		if got := listObjects(objs, 5); got != want {
			t.Errorf("listObjects(%q) = %q, want %q", objs, got, want)
		}
	}
}
