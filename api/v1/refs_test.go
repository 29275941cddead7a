package v1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

var inlineObject = unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap"}}

func TestIsRef(t *testing.T) {
	tests := map[string]struct {
		obj       ClusterObjectSetObject
		isRef     bool
		secret    types.NamespacedName
		refersOne bool
	}{
		"inline": {obj: ClusterObjectSetObject{Object: inlineObject}},
		"ref":    {obj: ClusterObjectSetObject{Ref: ObjectSourceRef{Name: "s", Key: "k"}}, isRef: true, secret: types.NamespacedName{Namespace: "sys", Name: "s"}, refersOne: true},
		"ref to another namespace": {obj: ClusterObjectSetObject{Ref: ObjectSourceRef{Namespace: "user", Name: "s", Key: "k"}}, isRef: true,
			secret: types.NamespacedName{Namespace: "user", Name: "s"}, refersOne: true},
		// Invalid entries, seen only before validation: the inline object wins; an empty ref names no Secret.
		"both: inline":           {obj: ClusterObjectSetObject{Object: inlineObject, Ref: ObjectSourceRef{Name: "s", Key: "k"}}},
		"neither: a ref to none": {obj: ClusterObjectSetObject{}, isRef: true},
		"ref without a name":     {obj: ClusterObjectSetObject{Ref: ObjectSourceRef{Namespace: "user", Key: "k"}}, isRef: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.obj.IsRef(); got != tc.isRef {
				t.Errorf("IsRef = %v, want %v", got, tc.isRef)
			}
			secret, ok := tc.obj.SecretRef("sys")
			if ok != tc.refersOne || secret != tc.secret {
				t.Errorf("SecretRef = %v, %v; want %v, %v", secret, ok, tc.secret, tc.refersOne)
			}
		})
	}
}

func TestRefs(t *testing.T) {
	inline := ClusterObjectSetObject{Object: inlineObject}
	ref := func(ns, name string) ClusterObjectSetObject {
		return ClusterObjectSetObject{Ref: ObjectSourceRef{Namespace: ns, Name: name, Key: "k"}}
	}
	both := ClusterObjectSetObject{Object: inlineObject, Ref: ObjectSourceRef{Name: "s", Key: "k"}}
	cos := func(objs ...ClusterObjectSetObject) *ClusterObjectSet {
		return &ClusterObjectSet{Spec: ClusterObjectSetSpec{Phases: []ClusterObjectSetPhase{{Name: "p", Objects: objs}}}}
	}
	sys := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "sys", Name: name} }
	tests := map[string]struct {
		cos              *ClusterObjectSet
		wantPath         string
		wantRef, outside bool
		secrets          []types.NamespacedName
	}{
		"inline only":                       {cos: cos(inline)},
		"empty namespace is the system one": {cos: cos(inline, ref("", "s")), wantPath: "spec.phases[0].objects[1].ref", wantRef: true, secrets: []types.NamespacedName{sys("s")}},
		"system namespace given":            {cos: cos(ref("sys", "s")), wantPath: "spec.phases[0].objects[0].ref", wantRef: true, secrets: []types.NamespacedName{sys("s")}},
		"user namespace":                    {cos: cos(ref("user", "s")), outside: true, secrets: []types.NamespacedName{{Namespace: "user", Name: "s"}}},
		"user namespace beside a system one": {cos: cos(ref("user", "x"), ref("", "s")), wantPath: "spec.phases[0].objects[1].ref", wantRef: true, outside: true,
			secrets: []types.NamespacedName{{Namespace: "user", Name: "x"}, sys("s")}},
		"other name in the system namespace": {cos: cos(ref("", "other")), secrets: []types.NamespacedName{sys("other")}},
		"each Secret once, in spec order": {cos: cos(ref("", "b"), ref("sys", "a"), ref("", "b"), ref("", "s")), wantPath: "spec.phases[0].objects[3].ref", wantRef: true,
			secrets: []types.NamespacedName{sys("b"), sys("a"), sys("s")}},
		"an inline object with a ref is no ref": {cos: cos(both)},
		"an empty ref names no Secret":          {cos: cos(ClusterObjectSetObject{})},
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
			if diff := cmp.Diff(tc.secrets, tc.cos.ReferencedSecrets("sys")); diff != "" {
				t.Errorf("ReferencedSecrets (-want +got):\n%s", diff)
			}
		})
	}
}
