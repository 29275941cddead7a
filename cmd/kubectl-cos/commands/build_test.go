package commands

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
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

func TestBuildExternalize(t *testing.T) {
	const input = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: app}\ndata: {a: b}\n---\n" +
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: s, namespace: app}\n"
	tests := map[string]struct {
		args []string
		// secrets is how many Secrets are printed; 0: the inline ClusterObjectSet alone.
		secrets int
		note    string
	}{
		"bare --externalize is always": {args: []string{"--externalize"}, secrets: 1, note: "externalized 2 objects into 1 Secret in olmv1-system"},
		"always, json":                 {args: []string{"--externalize=always", "-o", "json"}, secrets: 1, note: "offline: nothing written"},
		"oversized keeps a small one":  {args: []string{"--externalize=oversized"}, note: "kept inline: spec is"},
		"oversized, low threshold":     {args: []string{"--externalize=oversized", "--externalize-threshold=10"}, secrets: 1, note: "over the 10-byte threshold"},
		"the annotation overrides":     {args: []string{"--externalize", "--annotations", "cos-externalizer.io/externalize=never"}, note: "kept inline"},
		"another system namespace":     {args: []string{"--externalize", "--system-namespace", "elsewhere"}, secrets: 1, note: "into 1 Secret in elsewhere"},
		"no flag: inline":              {},
	}
	inline, _, err := run(t, input, "build", "-", "--name", "x-1", "--revision", "1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, ph := range decodeCOS(t, inline).Spec.Phases {
		for _, m := range ph.Objects {
			b, _ := m.Object.MarshalJSON()
			want[m.Object.GetKind()] = string(b)
		}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := run(t, input, append([]string{"build", "-", "--name", "x-1", "--revision", "1"}, tc.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			if !strings.Contains(errOut, tc.note) {
				t.Errorf("stderr %q lacks %q", errOut, tc.note)
			}
			docs := documents(t, out)
			if len(docs) != tc.secrets+1 {
				t.Fatalf("%d documents, want %d Secrets and the ClusterObjectSet:\n%s", len(docs), tc.secrets, out)
			}
			secrets := map[string]*corev1.Secret{}
			for _, d := range docs[:tc.secrets] {
				var s corev1.Secret
				if err := yaml.Unmarshal([]byte(d), &s); err != nil {
					t.Fatal(err)
				}
				if s.Type != olmv1.SecretTypeObjectData || s.Immutable == nil || !*s.Immutable || s.Labels[olmv1.LabelRevisionName] != "x-1" {
					t.Errorf("Secret %s: type %s, immutable %v, labels %v", s.Name, s.Type, s.Immutable, s.Labels)
				}
				secrets[s.Namespace+"/"+s.Name] = &s
			}
			c := decodeCOS(t, docs[tc.secrets])
			got := map[string]string{}
			for _, ph := range c.Spec.Phases {
				for _, m := range ph.Objects {
					if !m.IsRef() {
						if tc.secrets > 0 {
							t.Errorf("%s is inline", m.Object.GetName())
						}
						b, _ := m.Object.MarshalJSON()
						got[m.Object.GetKind()] = string(b)
						continue
					}
					s := secrets[m.Ref.Namespace+"/"+m.Ref.Name]
					if s == nil {
						t.Fatalf("ref to %s/%s: no such Secret printed", m.Ref.Namespace, m.Ref.Name)
					}
					stored := s.Data[m.Ref.Key]
					if content.Key(stored) != m.Ref.Key {
						t.Errorf("key %s does not hash its content", m.Ref.Key)
					}
					b, err := content.Decode(stored, content.MaxDecompressedSize)
					if err != nil {
						t.Fatal(err)
					}
					var u unstructured.Unstructured
					if err := u.UnmarshalJSON(b); err != nil {
						t.Fatal(err)
					}
					j, _ := u.MarshalJSON()
					got[u.GetKind()] = string(j)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("resolved objects differ from the inline build (-inline +externalized):\n%s", diff)
			}
		})
	}
}

// documents splits YAML documents, or the items of a List printed as JSON, into YAML (JSON is YAML).
func documents(t *testing.T, out string) []string {
	t.Helper()
	if strings.HasPrefix(out, "{") {
		var list struct{ Items []json.RawMessage }
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		docs := make([]string, len(list.Items))
		for i, it := range list.Items {
			docs[i] = string(it)
		}
		return docs
	}
	return strings.Split(out, "---\n")
}

// decodeCOS reads a printed ClusterObjectSet.
func decodeCOS(t *testing.T, text string) *olmv1.ClusterObjectSet {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var c olmv1.ClusterObjectSet
	if err := json.Unmarshal(j, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func TestBuildBundleVersion(t *testing.T) {
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n"
	tests := map[string]struct {
		args    []string
		want    map[string]string
		wantErr string
	}{
		"none":             {args: nil, want: nil},
		"--bundle-version": {args: []string{"--bundle-version=1.2.3"}, want: map[string]string{olmv1.AnnotationBundleVersion: "1.2.3"}},
		"with other annotations": {args: []string{"--bundle-version=1.2.3", "--annotations=a=b"},
			want: map[string]string{olmv1.AnnotationBundleVersion: "1.2.3", "a": "b"}},
		"the same in --annotations": {args: []string{"--bundle-version=1.2.3", "--annotations=" + olmv1.AnnotationBundleVersion + "=1.2.3"},
			want: map[string]string{olmv1.AnnotationBundleVersion: "1.2.3"}},
		"disagreeing": {args: []string{"--bundle-version=1.2.3", "--annotations=" + olmv1.AnnotationBundleVersion + "=1.0.0"},
			wantErr: `--bundle-version "1.2.3" and --annotations olm.operatorframework.io/bundle-version="1.0.0" disagree: give one`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, _, err := run(t, cm, append([]string{"build", "-f", "-", "--name=v", "--revision=1"}, tc.args...)...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got olmv1.ClusterObjectSet
			if err := yaml.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}
