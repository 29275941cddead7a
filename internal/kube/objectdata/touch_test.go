package objectdata

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
)

// TestTouchWritesOnlyToDropDeadOwners: a touch writes a Secret only to drop owner references to
// ClusterObjectSets that are gone, so however often requests reference a Secret, it is written at
// most once per owner that went away (issue 35: no write amplification from the open port).
func TestTouchWritesOnlyToDropDeadOwners(t *testing.T) {
	const ns = "olmv1-system"
	owner := func(name, uid string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: name, UID: types.UID("uid-" + uid)}
	}
	live := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "live", UID: "uid-live"}}
	tests := map[string]struct {
		owners     []metav1.OwnerReference
		wantOwners []metav1.OwnerReference
		wantWrites int
	}{
		"no owners: nothing written":          {wantWrites: 0},
		"a live owner: nothing written":       {owners: []metav1.OwnerReference{owner("live", "live")}, wantOwners: []metav1.OwnerReference{owner("live", "live")}},
		"a dead owner: dropped, written once": {owners: []metav1.OwnerReference{owner("gone", "gone"), owner("live", "live")}, wantOwners: []metav1.OwnerReference{owner("live", "live")}, wantWrites: 1},
		"an earlier one of the same name":     {owners: []metav1.OwnerReference{owner("live", "old")}, wantWrites: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			key := client.ObjectKey{Namespace: ns, Name: "s"}
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name, OwnerReferences: tc.owners}, Type: olmv1.SecretTypeObjectData}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(sec, live.DeepCopy()).Build()
			w := &Writer{Client: c, Reader: c, Namespace: ns}
			before := &corev1.Secret{}
			if err := c.Get(context.Background(), key, before); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if untouched, err := w.Touch(context.Background(), []client.ObjectKey{key}); err != nil || len(untouched) != 0 {
					t.Fatalf("Touch: %v, untouched %v", err, untouched)
				}
			}
			got := &corev1.Secret{}
			if err := c.Get(context.Background(), key, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantOwners, got.OwnerReferences); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
			if len(got.Annotations) != 0 {
				t.Errorf("annotations written: %v", got.Annotations)
			}
			// The fake client numbers versions one by one.
			b, _ := strconv.Atoi(before.ResourceVersion)
			g, _ := strconv.Atoi(got.ResourceVersion)
			writes := g - b
			if writes != tc.wantWrites {
				t.Errorf("%d writes in three touches, want %d", writes, tc.wantWrites)
			}
		})
	}
}
