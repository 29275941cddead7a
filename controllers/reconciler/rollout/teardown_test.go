package rollout

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestTeardown(t *testing.T) {
	const self = types.UID("self")
	ref := func(uid types.UID, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "olm.operatorframework.io/v1", Kind: "ClusterObjectSet", Name: string(uid), UID: uid, Controller: ptr.To(controller)}
	}
	now := metav1.Now()
	tests := map[string]struct {
		owners   []metav1.OwnerReference
		deleting bool
		want     Step
	}{
		"ours: delete":                               {owners: []metav1.OwnerReference{ref(self, true)}, want: Delete},
		"ours, being deleted: wait":                  {owners: []metav1.OwnerReference{ref(self, true)}, deleting: true, want: AwaitDeletion},
		"adopted by a successor: release":            {owners: []metav1.OwnerReference{ref(self, false), ref("next", true)}, want: Release},
		"adopted, being deleted by another: release": {owners: []metav1.OwnerReference{ref("next", true)}, deleting: true, want: Release},
		"no controller: release":                     {owners: []metav1.OwnerReference{ref(self, false)}, want: Release},
		"no owners at all: release":                  {want: Release},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			live := &metav1.ObjectMeta{Name: "o", OwnerReferences: tc.owners}
			if tc.deleting {
				live.DeletionTimestamp = &now
			}
			if got := Teardown(live, self); got != tc.want {
				t.Errorf("Teardown = %v, want %v", got, tc.want)
			}
		})
	}
}
