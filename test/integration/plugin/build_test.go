package plugin_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// sent is the JSON a client sends for a ClusterObjectSet: without status and the zero
// creationTimestamp.
func sent(t *testing.T, c *olmv1.ClusterObjectSet) string {
	t.Helper()
	b, err := os.ReadFile(writeFile(t, c))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBuildEqualsTheTestHelper: kubectl cos build of the real bundles' folders gives exactly the
// ClusterObjectSet the tests' helper (builders.Bundle, with its own manifest reader) makes of them.
func TestBuildEqualsTheTestHelper(t *testing.T) {
	t.Parallel() // offline
	for name, tc := range map[string]struct{ bundle, namespace string }{
		"argocd":              {"argocd-install", "argocd"},
		"prometheus-operator": {"prometheus-operator-crds", "monitoring"},
	} {
		t.Run(name, func(t *testing.T) {
			dir, err := builders.BundleDir(tc.bundle)
			if err != nil {
				t.Fatal(err)
			}
			want, err := builders.Bundle(name, tc.bundle, tc.namespace)
			if err != nil {
				t.Fatal(err)
			}
			for _, output := range []string{"yaml", "json"} {
				r := mustPlugin(t, "build", dir, "--name", name, "--revision", "1", "--namespace", tc.namespace, "-o", output)
				got := decodeCOS(t, r.stdout)
				if diff := cmp.Diff(sent(t, want), sent(t, got)); diff != "" {
					t.Errorf("-o %s: build differs from the helper (-helper +build):\n%.3000s", output, diff)
				}
			}
		})
	}
}

// TestBuildWithProbesAndApply: a build with probes and a deadline is valid as the API server judges
// it (a server-side dry run through the webhook accepts it).
func TestBuildWithProbesAndApply(t *testing.T) {
	dir, err := builders.BundleDir("argocd-install")
	if err != nil {
		t.Fatal(err)
	}
	r := mustPlugin(t, "build", dir, "--name", "argocd-probes", "--revision", "2", "-n", "argocd", "--progress-deadline-minutes", "30",
		"--labels", "olm.operatorframework.io/owner-name=argocd",
		"--progression-probe", "kind=apps/Deployment;condition=Available=True",
		"--progression-probe", "selector=app.kubernetes.io/part-of=argocd;fields=spec.replicas==status.readyReplicas")
	got := decodeCOS(t, r.stdout)
	if len(got.Spec.ProgressionProbes) != 2 || got.Spec.ProgressDeadlineMinutes != 30 || got.Labels[olmv1.LabelOwnerName] != "argocd" {
		t.Errorf("spec: %+v, labels %v", got.Spec.ProgressionProbes, got.Labels)
	}
	file := writeText(t, t.TempDir(), "cos.yaml", r.stdout)
	if _, stderr, err := testenv.Kubectl(t, nil, "apply", "--server-side", "--dry-run=server", "-f", file); err != nil {
		t.Errorf("the API server refuses the build: %v\n%s", err, stderr)
	}
}

// TestBadInputNamesFileAndDocument: bad manifests and bad ClusterObjectSet files are refused with the
// file, the line and number of the document, and the field; nothing is written.
func TestBadInputNamesFileAndDocument(t *testing.T) {
	dir := t.TempDir()
	good := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n"
	tests := map[string]struct {
		files map[string]string
		// args get the folder's path in place of "DIR" and a file's in place of its name.
		args []string
		want []string
	}{
		"missing kind in the third document": {
			files: map[string]string{"a.yaml": good + "---\n" + good + "---\napiVersion: v1\nmetadata:\n  name: nokind\n"},
			args:  []string{"build", "a.yaml", "--name", "x", "--revision", "1", "-n", "ns"},
			want:  []string{"a.yaml:11: document 3 (object nokind): kind: Required value"},
		},
		"YAML syntax error, line counted in the file": {
			files: map[string]string{"b.yaml": good + "---\napiVersion: v1\nkind: ConfigMap\n  name: [\n"},
			args:  []string{"build", "b.yaml", "--name", "x", "--revision", "1", "-n", "ns"},
			want:  []string{"b.yaml:6: document 2: not valid YAML: line 8:"},
		},
		"namespaced object without a namespace": {
			files: map[string]string{"c.yaml": good},
			args:  []string{"build", "c.yaml", "--name", "x", "--revision", "1"},
			want:  []string{"c.yaml:1: document 1 (ConfigMap ok): metadata.namespace: Required value: ConfigMap is namespaced; set metadata.namespace or pass --namespace"},
		},
		"the same object in two files of a folder": {
			files: map[string]string{"d1.yaml": good, "d2.yaml": "# comment\n" + good},
			args:  []string{"build", "DIR", "--name", "x", "--revision", "1", "-n", "ns"},
			want:  []string{"d2.yaml:2: document 1 (ConfigMap ns/ok): Duplicate value: the same object as ", "d1.yaml:1: document 1"},
		},
		"several problems at once, with a bad probe": {
			files: map[string]string{"e.yaml": "kind: ConfigMap\nmetadata: {name: a}\n---\n- a list\n"},
			args:  []string{"build", "e.yaml", "--name", "x", "--revision", "1", "--progression-probe", "kind=Pod"},
			want: []string{"3 problems:", "e.yaml:1: document 1 (ConfigMap a): apiVersion: Required value",
				"e.yaml:4: document 2: the document is a list, not an object", "--progression-probe[0]: no assertion"},
		},
		"an invalid label, with its field": {
			files: map[string]string{"f.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n  labels: {'bad key!': v}\n"},
			args:  []string{"build", "f.yaml", "--name", "x", "--revision", "1"},
			want:  []string{"f.yaml:1: document 1 (ConfigMap ns/a): metadata.labels: Invalid value: "},
		},
		"apply: not a ClusterObjectSet": {
			files: map[string]string{"g.yaml": good},
			args:  []string{"apply", "-f", "g.yaml"},
			want:  []string{"g.yaml:1: document 1 (ConfigMap ok): kind: Unsupported value: want a ClusterObjectSet"},
		},
		"apply: an invalid ClusterObjectSet, refused before anything is written": {
			files: map[string]string{"h.yaml": "apiVersion: olm.operatorframework.io/v1\nkind: ClusterObjectSet\nmetadata: {name: bad-input}\n" +
				"spec:\n  lifecycleState: Active\n  revision: 1\n  collisionProtection: Prevent\n  phases:\n  - name: Not_A_Label\n    objects:\n    - object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default}}\n"},
			args: []string{"apply", "-f", "h.yaml"},
			want: []string{`h.yaml:1: document 1 (ClusterObjectSet bad-input): ClusterObjectSet.olm.operatorframework.io "bad-input" is invalid: spec.phases[0].name: Invalid value: "Not_A_Label"`},
		},
		"apply: a revision out of range, on a server dry run": {
			files: map[string]string{"i.yaml": "apiVersion: olm.operatorframework.io/v1\nkind: ClusterObjectSet\nmetadata: {name: bad-input-2}\nspec: {lifecycleState: Active, revision: 0, collisionProtection: Prevent}\n"},
			args:  []string{"apply", "-f", "i.yaml", "--dry-run=server"},
			want:  []string{`i.yaml:1: document 1 (ClusterObjectSet bad-input-2): ClusterObjectSet.olm.operatorframework.io "bad-input-2" is invalid: spec.revision: Invalid value: 0: spec.revision in body should be greater than or equal to 1`},
		},
		"size: bad YAML": {
			files: map[string]string{"j.yaml": "apiVersion: v1\nkind: [\n"},
			args:  []string{"size", "-f", "j.yaml"},
			want:  []string{"j.yaml:1: document 1: not valid YAML"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sub := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := os.MkdirAll(sub, 0o700); err != nil {
				t.Fatal(err)
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				switch _, isFile := tc.files[a]; {
				case a == "DIR":
					a = sub
				case isFile:
					a = filepath.Join(sub, a)
				}
				args[i] = a
			}
			for f, text := range tc.files {
				writeText(t, sub, f, text)
			}
			secretsBefore := len(testenv.Env.ObjectDataSecrets(t, "bad-input"))
			r := plugin(t, args...)
			if r.err == nil {
				t.Fatalf("accepted:\n%s", r.stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, r.err)
				}
			}
			if r.stdout != "" {
				t.Errorf("printed on a refusal:\n%.500s", r.stdout)
			}
			if n := len(testenv.Env.ObjectDataSecrets(t, "bad-input")); n != secretsBefore || cosExists(t, "bad-input") {
				t.Errorf("something was written for a refused apply")
			}
		})
	}
}
