package argocd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/health"
	appv1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

// root is the repository's root, from this module's folder.
const root = "../../.."

// catalogue is the health check, laid out as in Argo CD's resource_customizations.
var catalogue = filepath.Join(root, "hack", "argocd", "resource_customizations", "olm.operatorframework.io", "ClusterObjectSet")

// catalogueTests is health_test.yaml, in the format of Argo CD's own catalogue tests.
type catalogueTests struct {
	Tests []struct {
		InputPath    string              `json:"inputPath"`
		HealthStatus health.HealthStatus `json:"healthStatus"`
	} `json:"tests"`
}

func readTests(t *testing.T) catalogueTests {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(catalogue, "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests catalogueTests
	if err := yaml.UnmarshalStrict(b, &tests); err != nil {
		t.Fatalf("health_test.yaml: %v", err)
	}
	if len(tests.Tests) == 0 {
		t.Fatal("health_test.yaml has no tests")
	}
	return tests
}

func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func readScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(catalogue, "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCatalogue runs health_test.yaml as Argo CD's own catalogue test in util/lua does (the script
// executed by util/lua's VM with the standard libraries open), and
// again with them closed, as the application controller runs a script of argocd-cm by default. Every
// file of testdata/ must have a test.
func TestCatalogue(t *testing.T) {
	script := readScript(t)
	tests := readTests(t)
	tested := map[string]bool{}
	for _, tc := range tests.Tests {
		tested[filepath.ToSlash(tc.InputPath)] = true
		for _, openLibs := range []bool{true, false} {
			name := tc.InputPath
			if !openLibs {
				name += "/no-open-libs"
			}
			t.Run(name, func(t *testing.T) {
				obj := readObject(t, filepath.Join(catalogue, tc.InputPath))
				got, err := lua.VM{UseOpenLibs: openLibs}.ExecuteHealthLua(obj, script)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(&tc.HealthStatus, got); diff != "" {
					t.Errorf("health (-want +got):\n%s", diff)
				}
			})
		}
	}
	files, err := filepath.Glob(filepath.Join(catalogue, "testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if rel := "testdata/" + filepath.Base(f); !tested[rel] {
			t.Errorf("%s has no test in health_test.yaml", rel)
		}
	}
}

// docsConfigMap is the argocd-cm of docs/gitops.md: the yaml block that names it.
func docsConfigMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	for _, block := range yamlBlocks(t, filepath.Join(root, "docs", "gitops.md")) {
		if !strings.Contains(block, "name: argocd-cm") {
			continue
		}
		cm := &corev1.ConfigMap{}
		if err := yaml.UnmarshalStrict([]byte(block), cm); err != nil {
			t.Fatalf("the argocd-cm of docs/gitops.md: %v", err)
		}
		return cm
	}
	t.Fatal("docs/gitops.md has no argocd-cm block")
	return nil
}

// yamlBlocks returns the fenced yaml blocks of a Markdown file.
func yamlBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```yaml":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// TestApplicationControllerPath reads the argocd-cm of docs/gitops.md with Argo CD's settings
// manager and assesses each testdata object as the application controller does
// (gitops-engine's health.GetResourceHealth with util/lua's overrides): the verdicts of
// health_test.yaml, but for a set being deleted, which gitops-engine reports as Progressing "Pending
// deletion; blocked by finalizers: ..." before any script runs. The script in argocd-cm is health.lua, byte for byte.
func TestApplicationControllerPath(t *testing.T) {
	overrides := readOverrides(t)
	if diff := cmp.Diff(readScript(t), overrides["olm.operatorframework.io/ClusterObjectSet"].HealthLua); diff != "" {
		t.Errorf("the script of docs/gitops.md's argocd-cm is not health.lua (-health.lua +docs):\n%s", diff)
	}
	for _, tc := range readTests(t).Tests {
		t.Run(tc.InputPath, func(t *testing.T) {
			obj := readObject(t, filepath.Join(catalogue, tc.InputPath))
			want := &tc.HealthStatus
			if obj.GetDeletionTimestamp() != nil {
				want = &health.HealthStatus{Status: health.HealthStatusProgressing,
					Message: "Pending deletion; blocked by finalizers: " + strings.Join(obj.GetFinalizers(), ", ")}
			}
			got, err := health.GetResourceHealth(obj, lua.ResourceHealthOverrides(overrides))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("health (-want +got):\n%s", diff)
			}
		})
	}
}

// readOverrides reads the argocd-cm of docs/gitops.md with Argo CD's settings manager, as the
// application controller reads its resource overrides.
func readOverrides(t *testing.T) map[string]appv1.ResourceOverride {
	t.Helper()
	cm := docsConfigMap(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: cm.Namespace,
		Labels: map[string]string{"app.kubernetes.io/part-of": "argocd"}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr := settings.NewSettingsManager(ctx, fake.NewClientset(cm, secret), cm.Namespace)
	overrides, err := mgr.GetResourceOverrides()
	if err != nil {
		t.Fatalf("argocd-cm of docs/gitops.md: %v", err)
	}
	if o := overrides["olm.operatorframework.io/ClusterObjectSet"]; o.HealthLua == "" {
		t.Fatalf("argocd-cm of docs/gitops.md: no health check for olm.operatorframework.io/ClusterObjectSet in %v", overrides)
	}
	return overrides
}

// TestWithoutTheCheck: without a customization, Argo CD has no health for any state of a
// ClusterObjectSet (it ships none for olm.operatorframework.io), so an Application counts it as
// Healthy and a sync wave does not wait for it. The table of docs/gitops.md.
func TestWithoutTheCheck(t *testing.T) {
	for _, tc := range readTests(t).Tests {
		t.Run(tc.InputPath, func(t *testing.T) {
			obj := readObject(t, filepath.Join(catalogue, tc.InputPath))
			if obj.GetDeletionTimestamp() != nil {
				return
			}
			got, err := health.GetResourceHealth(obj, lua.ResourceHealthOverrides(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got != nil {
				t.Errorf("health without the check: %+v, want none", got)
			}
		})
	}
}
