package builders

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestFromBundle(t *testing.T) {
	mk := func(apiVersion, kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	in := []*unstructured.Unstructured{
		mk("apps/v1", "Deployment", "", "server"),
		mk("v1", "ConfigMap", "elsewhere", "kept"),
		mk("rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin"),
		mk("v1", "Namespace", "", "argocd"),
		mk("example.com/v1", "Widget", "", "w"),
	}
	got, err := FromBundle("b", in, "argocd")
	if err != nil {
		t.Fatal(err)
	}
	type placed struct{ Phase, Kind, Namespace, Name string }
	var gotPlaced []placed
	for _, p := range got.Spec.Phases {
		for _, o := range p.Objects {
			gotPlaced = append(gotPlaced, placed{p.Name, o.Object.GetKind(), o.Object.GetNamespace(), o.Object.GetName()})
		}
	}
	want := []placed{
		{"namespaces", "Namespace", "", "argocd"},
		{"configuration", "ConfigMap", "elsewhere", "kept"},
		{"roles", "ClusterRole", "", "admin"},
		{"deploy", "Deployment", "argocd", "server"},
		{"deploy", "Widget", "argocd", "w"},
	}
	if diff := cmp.Diff(want, gotPlaced); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}
	if in[0].GetNamespace() != "" {
		t.Error("FromBundle changed its input")
	}
}

func TestFromBundleSplitsLargePhases(t *testing.T) {
	var in []*unstructured.Unstructured
	for _, o := range InlineConfigMaps("ns", "c", 120) {
		in = append(in, o.Object.DeepCopy())
	}
	got, err := FromBundle("b", in, "")
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var names []string
	for _, p := range got.Spec.Phases {
		names = append(names, p.Name)
		sizes = append(sizes, len(p.Objects))
	}
	if diff := cmp.Diff([]string{"configuration", "configuration-2", "configuration-3"}, names); diff != "" {
		t.Errorf("phase names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{50, 50, 20}, sizes); diff != "" {
		t.Errorf("phase sizes (-want +got):\n%s", diff)
	}
}

// TestExcerptsSort sorts the excerpts of the real bundles (Excerpt) into the producer phases.
func TestExcerptsSort(t *testing.T) {
	tests := map[string]struct {
		bundle, namespace string
		want              map[string]int // phase name to object count
		wantOrder         []string
	}{
		"Argo CD": {"argocd-install", "argocd",
			map[string]int{"policies": 1, "identity": 1, "configuration": 3, "crds": 1, "roles": 2, "bindings": 2, "infrastructure": 1, "deploy": 2},
			[]string{"policies", "identity", "configuration", "crds", "roles", "bindings", "infrastructure", "deploy"}},
		"prometheus-operator": {"prometheus-operator-crds", "monitoring", map[string]int{"crds": 2}, []string{"crds"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cos, err := Excerpt("excerpt", tc.bundle, tc.namespace)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			var order []string
			for _, p := range cos.Spec.Phases {
				got[p.Name] = len(p.Objects)
				order = append(order, p.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("objects per phase (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOrder, order); diff != "" {
				t.Errorf("phase order (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkBundles reads and sorts the real bundles, and checks their phases as TestExcerptsSort
// checks the excerpts'. It skips without `make testdata`.
func BenchmarkBundles(b *testing.B) {
	tests := map[string]struct {
		bundle, namespace string
		want              map[string]int
	}{
		"argocd": {"argocd-install", "argocd",
			map[string]int{"policies": 7, "identity": 7, "configuration": 9, "crds": 3, "roles": 9, "bindings": 9, "infrastructure": 8, "deploy": 7}},
		"prometheus": {"prometheus-operator-crds", "monitoring", map[string]int{"crds": 10}},
	}
	for name, tc := range tests {
		b.Run(name, func(b *testing.B) {
			if _, err := BundleDir(tc.bundle); err != nil {
				b.Skip(err)
			}
			for b.Loop() {
				cos, err := Bundle("bench", tc.bundle, tc.namespace)
				if err != nil {
					b.Fatal(err)
				}
				got := map[string]int{}
				for _, p := range cos.Spec.Phases {
					got[p.Name] = len(p.Objects)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					b.Fatalf("objects per phase (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestBundleDirMissing(t *testing.T) {
	t.Setenv("COS_TESTDATA_DIR", t.TempDir())
	_, err := BundleDir("argocd-install")
	if err == nil || !strings.Contains(err.Error(), "COS_TESTDATA_DIR is set") {
		t.Errorf("error %v, want one that names COS_TESTDATA_DIR", err)
	}
}
