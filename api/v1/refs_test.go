package v1

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRefs(t *testing.T) {
	inline := ClusterObjectSetObject{Object: unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap"}}}
	ref := func(ns, name string) ClusterObjectSetObject {
		return ClusterObjectSetObject{Ref: ObjectSourceRef{Namespace: ns, Name: name, Key: "k"}}
	}
	cos := func(objs ...ClusterObjectSetObject) *ClusterObjectSet {
		return &ClusterObjectSet{Spec: ClusterObjectSetSpec{Phases: []ClusterObjectSetPhase{{Name: "p", Objects: objs}}}}
	}
	tests := map[string]struct {
		cos              *ClusterObjectSet
		wantPath         string
		wantRef, outside bool
	}{
		"inline only":                        {cos: cos(inline)},
		"empty namespace is the system one":  {cos: cos(inline, ref("", "s")), wantPath: "spec.phases[0].objects[1].ref", wantRef: true},
		"system namespace given":             {cos: cos(ref("sys", "s")), wantPath: "spec.phases[0].objects[0].ref", wantRef: true},
		"user namespace":                     {cos: cos(ref("user", "s")), outside: true},
		"user namespace beside a system one": {cos: cos(ref("user", "x"), ref("", "s")), wantPath: "spec.phases[0].objects[1].ref", wantRef: true, outside: true},
		"other name in the system namespace": {cos: cos(ref("", "other"))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path, ok := tc.cos.RefTo("sys", "s", "sys")
			if ok != tc.wantRef || path != tc.wantPath {
				t.Errorf("RefTo = %q, %v; want %q, %v", path, ok, tc.wantPath, tc.wantRef)
			}
			if got := tc.cos.RefsOutside("sys"); got != tc.outside {
				t.Errorf("RefsOutside = %v, want %v", got, tc.outside)
			}
		})
	}
}
