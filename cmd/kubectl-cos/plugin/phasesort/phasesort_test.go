package phasesort

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func obj(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	return u
}

// summary renders phases as "phase: kind/name ..." lines for comparison.
func summary(ps []Phase) []string {
	var out []string
	for _, p := range ps {
		line := p.Name + ":"
		for _, o := range p.Objects {
			line += " " + o.GetKind() + "/" + o.GetName()
		}
		out = append(out, line)
	}
	return out
}

func TestPhaseOf(t *testing.T) {
	tests := map[string]struct {
		gk   schema.GroupKind
		want string
	}{
		"namespace":               {schema.GroupKind{Kind: "Namespace"}, "namespaces"},
		"network policy":          {schema.GroupKind{Group: "networking.k8s.io", Kind: "NetworkPolicy"}, "policies"},
		"service account":         {schema.GroupKind{Kind: "ServiceAccount"}, "identity"},
		"secret":                  {schema.GroupKind{Kind: "Secret"}, "configuration"},
		"pvc":                     {schema.GroupKind{Kind: "PersistentVolumeClaim"}, "storage"},
		"crd":                     {schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, "crds"},
		"cluster role":            {schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, "roles"},
		"role binding":            {schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}, "bindings"},
		"service":                 {schema.GroupKind{Kind: "Service"}, "infrastructure"},
		"issuer":                  {schema.GroupKind{Group: "cert-manager.io", Kind: "Issuer"}, "infrastructure"},
		"certificate":             {schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}, "deploy"},
		"deployment":              {schema.GroupKind{Group: "apps", Kind: "Deployment"}, "deploy"},
		"statefulset (unlisted)":  {schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "deploy"},
		"custom resource":         {schema.GroupKind{Group: "example.com", Kind: "Widget"}, "deploy"},
		"vpa":                     {schema.GroupKind{Group: "autoscaling.k8s.io", Kind: "VerticalPodAutoscaler"}, "scaling"},
		"service monitor":         {schema.GroupKind{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}, "publish"},
		"webhook configuration":   {schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}, "admission"},
		"kind in the wrong group": {schema.GroupKind{Group: "example.com", Kind: "Namespace"}, "deploy"},
		"role of another group":   {schema.GroupKind{Group: "example.com", Kind: "Role"}, "deploy"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := PhaseOf(tc.gk); got != tc.want {
				t.Errorf("PhaseOf(%v) = %q, want %q", tc.gk, got, tc.want)
			}
		})
	}
}

func TestSort(t *testing.T) {
	tests := map[string]struct {
		objs    []*unstructured.Unstructured
		max     int
		want    []string
		wantErr bool
	}{
		"empty": {max: 50},
		"producer order, input order kept within a phase": {
			objs: []*unstructured.Unstructured{
				obj("apps/v1", "Deployment", "d"),
				obj("v1", "ConfigMap", "c2"),
				obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "w"),
				obj("v1", "Namespace", "ns"),
				obj("v1", "ConfigMap", "c1"),
				obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "crd"),
			},
			max:  50,
			want: []string{"namespaces: Namespace/ns", "configuration: ConfigMap/c2 ConfigMap/c1", "crds: CustomResourceDefinition/crd", "deploy: Deployment/d", "admission: ValidatingWebhookConfiguration/w"},
		},
		"a phase over the limit is split in order": {
			objs: []*unstructured.Unstructured{
				obj("v1", "ConfigMap", "a"), obj("v1", "ConfigMap", "b"), obj("v1", "ConfigMap", "c"),
				obj("v1", "ConfigMap", "d"), obj("v1", "ConfigMap", "e"), obj("v1", "Service", "s"),
			},
			max:  2,
			want: []string{"configuration: ConfigMap/a ConfigMap/b", "configuration-2: ConfigMap/c ConfigMap/d", "configuration-3: ConfigMap/e", "infrastructure: Service/s"},
		},
		"exactly the limit is not split": {
			objs: []*unstructured.Unstructured{obj("v1", "ConfigMap", "a"), obj("v1", "ConfigMap", "b")},
			max:  2,
			want: []string{"configuration: ConfigMap/a ConfigMap/b"},
		},
		"zero limit is an error":     {objs: []*unstructured.Unstructured{obj("v1", "ConfigMap", "a")}, max: 0, wantErr: true},
		"negative limit is an error": {max: -1, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Sort(tc.objs, tc.max)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, summary(got)); diff != "" {
				t.Errorf("phases (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzSort checks the invariants of Sort for any mix of kinds and any limit: every object lands in
// exactly one phase, no phase is empty or over the limit, names are unique DNS labels, and phases
// follow the producer order.
func FuzzSort(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, uint8(2))
	f.Add([]byte{9, 9, 9, 9, 9, 9, 9, 9, 9}, uint8(1))
	kinds := []schema.GroupVersionKind{
		{Version: "v1", Kind: "Namespace"}, {Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Service"},
		{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "example.com", Version: "v1", Kind: "Widget"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"},
		{Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor"}, {Version: "v1", Kind: "ServiceAccount"},
	}
	rank := map[string]int{}
	for i, p := range Order {
		rank[p] = i
	}
	f.Fuzz(func(t *testing.T, picks []byte, limit uint8) {
		perPhase := int(limit%60) + 1
		var objs []*unstructured.Unstructured
		for i, p := range picks {
			gvk := kinds[int(p)%len(kinds)]
			o := &unstructured.Unstructured{}
			o.SetGroupVersionKind(gvk)
			o.SetName(fmt.Sprint(i))
			objs = append(objs, o)
		}
		phases, err := Sort(objs, perPhase)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		names := map[string]bool{}
		last := -1
		for _, p := range phases {
			if len(p.Objects) == 0 || len(p.Objects) > perPhase {
				t.Fatalf("phase %s has %d objects, limit %d", p.Name, len(p.Objects), perPhase)
			}
			if names[p.Name] {
				t.Fatalf("duplicate phase name %s", p.Name)
			}
			names[p.Name] = true
			base := PhaseOf(p.Objects[0].GroupVersionKind().GroupKind())
			if rank[base] < last {
				t.Fatalf("phase %s out of producer order", p.Name)
			}
			last = rank[base]
			for _, o := range p.Objects {
				if PhaseOf(o.GroupVersionKind().GroupKind()) != base {
					t.Fatalf("%s/%s in phase %s", o.GetKind(), o.GetName(), p.Name)
				}
				if seen[o.GetName()] {
					t.Fatalf("object %s in two phases", o.GetName())
				}
				seen[o.GetName()] = true
			}
		}
		if len(seen) != len(objs) {
			t.Fatalf("%d of %d objects placed", len(seen), len(objs))
		}
	})
}
