package flux_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fluxstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/runtime/cel"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

// root is the repository's root, from this module's folder.
const root = "../../.."

var (
	// testdata holds the ClusterObjectSets the health checks are tested on: the Argo CD health
	// check's (statuses of real rollouts, recorded by test/integration/controller, and hand-made ones).
	testdata = filepath.Join(root, "hack", "argocd", "resource_customizations", "olm.operatorframework.io", "ClusterObjectSet", "testdata")
	// kustomizationFile is the Kustomization with the healthCheckExprs, as docs/gitops.md shows it.
	kustomizationFile = filepath.Join(root, "hack", "flux", "kustomization.yaml")
)

// healthTests is hack/flux/health_test.yaml: for each object of testdata, the status Flux computes
// with the healthCheckExprs, without them (kstatus: Flux's fork and sigs.k8s.io/cli-utils agree), and
// without them had the status the standard Reconciling and Stalled conditions (measured for the
// choice docs/gitops.md explains; the reconciler does not write them).
type healthTests struct {
	Tests []struct {
		InputPath                     string `json:"inputPath"`
		HealthCheckExprs              string `json:"healthCheckExprs"`
		Kstatus                       string `json:"kstatus"`
		KstatusWithStandardConditions string `json:"kstatusWithStandardConditions"`
	} `json:"tests"`
}

func readTests(t *testing.T) healthTests {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "hack", "flux", "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests healthTests
	if err := yaml.UnmarshalStrict(b, &tests); err != nil {
		t.Fatalf("health_test.yaml: %v", err)
	}
	if len(tests.Tests) == 0 {
		t.Fatal("health_test.yaml has no tests")
	}
	return tests
}

// readObject decodes a file as client-go does an object read from the API server (integers as
// int64, which kstatus and the CEL evaluator's generation check need).
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, j)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return obj.(*unstructured.Unstructured)
}

// kustomizationSpec is the part of a Kustomization these tests read.
type kustomizationSpec struct {
	Spec struct {
		HealthCheckExprs []kustomize.CustomHealthCheck `json:"healthCheckExprs"`
	} `json:"spec"`
}

func healthChecks(t *testing.T, doc []byte, where string) []kustomize.CustomHealthCheck {
	t.Helper()
	var k kustomizationSpec
	if err := yaml.Unmarshal(doc, &k); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if len(k.Spec.HealthCheckExprs) != 1 {
		t.Fatalf("%s: %d healthCheckExprs, want 1", where, len(k.Spec.HealthCheckExprs))
	}
	return k.Spec.HealthCheckExprs
}

// docsHealthChecks are the healthCheckExprs of docs/gitops.md's Kustomization.
func docsHealthChecks(t *testing.T) []kustomize.CustomHealthCheck {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "gitops.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cur []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```yaml":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			if block := strings.Join(cur, "\n"); strings.Contains(block, "healthCheckExprs:") {
				return healthChecks(t, []byte(block), "docs/gitops.md")
			}
		case in:
			cur = append(cur, line)
		}
	}
	t.Fatal("docs/gitops.md has no Kustomization with healthCheckExprs")
	return nil
}

// TestHealthCheckExprs evaluates the healthCheckExprs with Flux's own code: the status reader
// kustomize-controller builds from a Kustomization's healthCheckExprs (runtime/cel.NewStatusReader,
// which also validates them) reading each object. docs/gitops.md shows the same expressions.
func TestHealthCheckExprs(t *testing.T) {
	b, err := os.ReadFile(kustomizationFile)
	if err != nil {
		t.Fatal(err)
	}
	checks := healthChecks(t, b, kustomizationFile)
	if diff := cmp.Diff(checks, docsHealthChecks(t)); diff != "" {
		t.Errorf("docs/gitops.md's healthCheckExprs differ from hack/flux/kustomization.yaml (-file +docs):\n%s", diff)
	}
	newReader, err := cel.NewStatusReader(checks)
	if err != nil {
		t.Fatal(err)
	}
	reader := newReader(nil)
	ctx := context.Background()
	tested := map[string]bool{}
	for _, tc := range readTests(t).Tests {
		tested[tc.InputPath] = true
		t.Run(tc.InputPath, func(t *testing.T) {
			obj := readObject(t, filepath.Join(testdata, tc.InputPath))
			got, err := reader.ReadStatusForObject(ctx, nil, obj)
			if err != nil {
				t.Fatal(err)
			}
			// An expression that cannot be evaluated (a field it reads is missing) makes the status
			// Unknown, with the error: Flux keeps waiting, and names the error at its timeout.
			if string(got.Status) != tc.HealthCheckExprs {
				t.Errorf("healthCheckExprs: %s (error: %v), want %s", got.Status, got.Error, tc.HealthCheckExprs)
			}
			if got.Error != nil {
				t.Logf("%s: %v", got.Status, got.Error)
			}
		})
	}
	files, err := filepath.Glob(filepath.Join(testdata, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !tested[filepath.Base(f)] {
			t.Errorf("%s has no test in hack/flux/health_test.yaml", filepath.Base(f))
		}
	}
}

// TestKstatus is what Flux (wait: true, healthChecks) and other kstatus users see without the
// expressions: both kstatus implementations, Flux's fork of cli-utils and sigs.k8s.io/cli-utils.
func TestKstatus(t *testing.T) {
	for _, tc := range readTests(t).Tests {
		t.Run(tc.InputPath, func(t *testing.T) {
			obj := readObject(t, filepath.Join(testdata, tc.InputPath))
			flux, err := fluxstatus.Compute(obj)
			if err != nil {
				t.Fatal(err)
			}
			sigs, err := kstatus.Compute(obj)
			if err != nil {
				t.Fatal(err)
			}
			if string(flux.Status) != tc.Kstatus || string(sigs.Status) != tc.Kstatus {
				t.Errorf("kstatus: Flux's %s (%s), sigs.k8s.io's %s (%s), want %s", flux.Status, flux.Message, sigs.Status, sigs.Message, tc.Kstatus)
			}
		})
	}
}

// TestKstatusWithStandardConditions measures the alternative docs/gitops.md weighs: had the
// reconciler also written kstatus's Reconciling (True while Progressing is True and not Succeeded)
// and Stalled (True while Progressing is False, but Archived) beside upstream's conditions.
func TestKstatusWithStandardConditions(t *testing.T) {
	for _, tc := range readTests(t).Tests {
		t.Run(tc.InputPath, func(t *testing.T) {
			obj := readObject(t, filepath.Join(testdata, tc.InputPath))
			withStandardConditions(t, obj)
			got, err := fluxstatus.Compute(obj)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Status) != tc.KstatusWithStandardConditions {
				t.Errorf("kstatus with Reconciling/Stalled: %s (%s), want %s", got.Status, got.Message, tc.KstatusWithStandardConditions)
			}
		})
	}
}

func withStandardConditions(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	conds, _, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conds {
		c := c.(map[string]any)
		if c["type"] != "Progressing" {
			continue
		}
		reconciling := c["status"] == "True" && c["reason"] != "Succeeded"
		stalled := c["status"] == "False" && c["reason"] != "Archived"
		for typ, on := range map[string]bool{"Reconciling": reconciling, "Stalled": stalled} {
			s := "False"
			if on {
				s = "True"
			}
			conds = append(conds, map[string]any{"type": typ, "status": s, "reason": c["reason"], "message": c["message"],
				"observedGeneration": c["observedGeneration"], "lastTransitionTime": c["lastTransitionTime"]})
		}
	}
	if conds != nil {
		if err := unstructured.SetNestedSlice(obj.Object, conds, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
	}
}
