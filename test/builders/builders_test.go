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

func TestRealBundlesSort(t *testing.T) {
	argo, err := Bundle("argocd", "argocd-install", "argocd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	n := 0
	for _, p := range argo.Spec.Phases {
		names = append(names, p.Name)
		n += len(p.Objects)
	}
	if diff := cmp.Diff([]string{"policies", "identity", "configuration", "crds", "roles", "bindings", "infrastructure", "deploy"}, names); diff != "" {
		t.Errorf("Argo CD phases (-want +got):\n%s", diff)
	}
	if n != 59 {
		t.Errorf("Argo CD: %d objects, want 59", n)
	}
	prom, err := Bundle("prom", "prometheus-operator-crds", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	if len(prom.Spec.Phases) != 1 || prom.Spec.Phases[0].Name != "crds" || len(prom.Spec.Phases[0].Objects) != 10 {
		t.Errorf("prometheus-operator: want one crds phase of 10 objects, got %d phases", len(prom.Spec.Phases))
	}
}

func TestBundleDirMissing(t *testing.T) {
	t.Setenv("COS_TESTDATA_DIR", t.TempDir())
	_, err := BundleDir("argocd-install")
	if err == nil || !strings.Contains(err.Error(), "COS_TESTDATA_DIR is set") {
		t.Errorf("error %v, want one that names COS_TESTDATA_DIR", err)
	}
}
