package controllers

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// TestControllingRevision: an event of a managed object wakes the ClusterObjectSet its controller
// reference names (cluster-scoped: no namespace), whatever the reference's version, and nothing for
// an owner that is not a controller or not a ClusterObjectSet.
func TestControllingRevision(t *testing.T) {
	ref := func(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name + "-uid"), Controller: ptr.To(controller)}
	}
	cosRef := func(name string, controller bool) metav1.OwnerReference {
		return ref(olmv1.GroupVersion.String(), olmv1.ClusterObjectSetKind, name, controller)
	}
	wake := func(name string) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	for name, tc := range map[string]struct {
		refs []metav1.OwnerReference
		want []reconcile.Request
	}{
		"controlled":                      {refs: []metav1.OwnerReference{cosRef("a", true)}, want: wake("a")},
		"controlled, beside other owners": {refs: []metav1.OwnerReference{cosRef("b", false), ref("v1", "ConfigMap", "c", false), cosRef("a", true)}, want: wake("a")},
		"another version of the group":    {refs: []metav1.OwnerReference{ref(olmv1.GroupVersion.Group+"/v9", olmv1.ClusterObjectSetKind, "a", true)}, want: wake("a")},
		"owned, not controlled":           {refs: []metav1.OwnerReference{cosRef("a", false)}},
		"controlled by another kind":      {refs: []metav1.OwnerReference{ref("apps/v1", "Deployment", "d", true)}},
		"the kind in another group":       {refs: []metav1.OwnerReference{ref("example.com/v1", olmv1.ClusterObjectSetKind, "a", true)}},
		"an apiVersion that is not one":   {refs: []metav1.OwnerReference{ref("a/b/c", olmv1.ClusterObjectSetKind, "a", true)}},
		"no owner":                        {},
	} {
		t.Run(name, func(t *testing.T) {
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", OwnerReferences: tc.refs}}
			if diff := cmp.Diff(tc.want, controllingRevision(context.Background(), obj)); diff != "" {
				t.Errorf("woken (-want +got):\n%s", diff)
			}
		})
	}
}
