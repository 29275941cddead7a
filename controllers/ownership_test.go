package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func cosRef(name, uid string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: name,
		UID: types.UID("uid-" + uid), Controller: ptr.To(controller), BlockOwnerDeletion: ptr.To(controller)}
}

func TestOwnerRefsFor(t *testing.T) {
	cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "uid-new"}}
	ours := cosRef("x", "new", true)
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keeper", UID: "uid-cm"}
	otherController := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "uid-d", Controller: ptr.To(true)}
	tests := map[string]struct {
		refs   []metav1.OwnerReference
		want   []metav1.OwnerReference
		change bool
	}{
		"no owner: ours added":           {refs: nil, want: []metav1.OwnerReference{ours}, change: true},
		"already ours":                   {refs: []metav1.OwnerReference{ours}, want: []metav1.OwnerReference{ours}},
		"earlier one of the same name":   {refs: []metav1.OwnerReference{cosRef("x", "old", true)}, want: []metav1.OwnerReference{ours}, change: true},
		"earlier one beside ours":        {refs: []metav1.OwnerReference{ours, cosRef("x", "old", false)}, want: []metav1.OwnerReference{ours}, change: true},
		"another owner is kept":          {refs: []metav1.OwnerReference{other, cosRef("x", "old", true)}, want: []metav1.OwnerReference{other, ours}, change: true},
		"controlled by something else":   {refs: []metav1.OwnerReference{otherController}, want: []metav1.OwnerReference{otherController}},
		"controlled by another COS name": {refs: []metav1.OwnerReference{cosRef("y", "y", true)}, want: []metav1.OwnerReference{cosRef("y", "y", true)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, change := ownerRefsFor(tc.refs, cos)
			if change != tc.change {
				t.Errorf("change = %v, want %v", change, tc.change)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("owner references (-want +got):\n%s", diff)
			}
		})
	}
}
