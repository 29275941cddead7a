package secretuse

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// indexOp is one change told to an UnusedIndex.
type indexOp struct {
	set       *olmv1.ClusterObjectSet // SetClusterObjectSet
	deleteSet string                  // DeleteClusterObjectSet
	secret    *corev1.Secret          // SetSecret, with size
	size      int64
	deleteSec string // DeleteSecret
}

func indexedCOS(name, uid string, deleting bool, refs ...string) *olmv1.ClusterObjectSet {
	c := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	if deleting {
		c.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	}
	var objs []olmv1.ClusterObjectSetObject
	for _, r := range refs {
		ns, name, found := cutNamespace(r)
		if !found {
			ns, name = "", r
		}
		objs = append(objs, olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Namespace: ns, Name: name, Key: "k"}})
	}
	if len(objs) > 0 {
		c.Spec.Phases = []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: objs}}
	}
	return c
}

// cutNamespace splits "ns/name".
func cutNamespace(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

func idxSecret(ns, name string, typ corev1.SecretType, ownerUIDs ...string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("s-" + name)}, Type: typ}
	for _, uid := range ownerUIDs {
		s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(),
			Kind: olmv1.ClusterObjectSetKind, Name: "owner", UID: types.UID(uid)})
	}
	return s
}

func TestUnusedIndex(t *testing.T) {
	od := corev1.SecretType(olmv1.SecretTypeObjectData)
	type want struct {
		Names []string
		Bytes int64
	}
	tests := map[string]struct {
		ops  []indexOp
		want want
	}{
		"nothing": {want: want{Names: []string{}}},
		"a Secret nobody references": {ops: []indexOp{{secret: idxSecret(sys, "a", od), size: 10}},
			want: want{Names: []string{"a"}, Bytes: 10}},
		"another type, another namespace: not counted": {ops: []indexOp{
			{secret: idxSecret(sys, "opaque", corev1.SecretTypeOpaque), size: 10},
			{secret: idxSecret("other", "a", od), size: 10},
		}, want: want{Names: []string{}}},
		"referenced by a live set, before or after the Secret is seen": {ops: []indexOp{
			{set: indexedCOS("x", "u1", false, "a")},
			{secret: idxSecret(sys, "a", od), size: 10},
			{secret: idxSecret(sys, "b", od), size: 20},
			{set: indexedCOS("y", "u2", false, sys+"/b")},
		}, want: want{Names: []string{}}},
		"a set being deleted is no user": {ops: []indexOp{
			{set: indexedCOS("x", "u1", true, "a")},
			{secret: idxSecret(sys, "a", od), size: 10},
		}, want: want{Names: []string{"a"}, Bytes: 10}},
		"a set that stops referencing, is deleted, or starts being deleted": {ops: []indexOp{
			{secret: idxSecret(sys, "a", od), size: 1},
			{secret: idxSecret(sys, "b", od), size: 2},
			{secret: idxSecret(sys, "c", od), size: 4},
			{set: indexedCOS("x", "u1", false, "a", "b")},
			{set: indexedCOS("y", "u2", false, "c")},
			{set: indexedCOS("x", "u1", false, "b")},
			{deleteSet: "y"},
		}, want: want{Names: []string{"a", "c"}, Bytes: 5}},
		"two users: unused once both are gone": {ops: []indexOp{
			{secret: idxSecret(sys, "a", od), size: 1},
			{set: indexedCOS("x", "u1", false, "a")},
			{set: indexedCOS("y", "u2", false, "a")},
			{set: indexedCOS("x", "u1", true, "a")},
		}, want: want{Names: []string{}}},
		"owned by an existing set, even one being deleted": {ops: []indexOp{
			{set: indexedCOS("x", "u1", true)},
			{secret: idxSecret(sys, "a", od, "u1"), size: 1},
			{secret: idxSecret(sys, "b", od, "u9"), size: 2},
		}, want: want{Names: []string{"b"}, Bytes: 2}},
		"its owner deleted, then re-created under another UID": {ops: []indexOp{
			{secret: idxSecret(sys, "a", od, "u1"), size: 1},
			{set: indexedCOS("x", "u1", false)},
			{deleteSet: "x"},
			{set: indexedCOS("x", "u2", false)},
		}, want: want{Names: []string{"a"}, Bytes: 1}},
		"a set's UID replaced in place (a relist)": {ops: []indexOp{
			{secret: idxSecret(sys, "a", od, "u1"), size: 1},
			{secret: idxSecret(sys, "b", od, "u2"), size: 2},
			{set: indexedCOS("x", "u1", false)},
			{set: indexedCOS("x", "u2", false)},
		}, want: want{Names: []string{"a"}, Bytes: 1}},
		"an owner dropped, a Secret deleted": {ops: []indexOp{
			{set: indexedCOS("x", "u1", false)},
			{secret: idxSecret(sys, "a", od, "u1"), size: 1},
			{secret: idxSecret(sys, "b", od), size: 2},
			{secret: idxSecret(sys, "a", od), size: 1},
			{deleteSec: "b"},
			{deleteSec: "never-seen"},
		}, want: want{Names: []string{"a"}, Bytes: 1}},
		"a size changes with the Secret": {ops: []indexOp{
			{secret: idxSecret(sys, "a", od), size: 1},
			{secret: idxSecret(sys, "a", od), size: 7},
		}, want: want{Names: []string{"a"}, Bytes: 7}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			x := NewUnusedIndex(sys)
			for _, op := range tc.ops {
				apply(x, op)
			}
			n, bytes := x.Unused()
			got := want{Names: x.UnusedNames(), Bytes: bytes}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if n != len(got.Names) {
				t.Errorf("Unused says %d Secrets, names %d", n, len(got.Names))
			}
		})
	}
}

func apply(x *UnusedIndex, op indexOp) {
	switch {
	case op.set != nil:
		x.SetClusterObjectSet(op.set)
	case op.deleteSet != "":
		x.DeleteClusterObjectSet(op.deleteSet)
	case op.secret != nil:
		x.SetSecret(op.secret, op.size)
	case op.deleteSec != "":
		x.DeleteSecret(types.NamespacedName{Namespace: sys, Name: op.deleteSec})
	}
}

// FuzzUnusedIndex: after any sequence of changes, the index holds exactly what UnusedSecrets says of
// the ClusterObjectSets and Secrets as they are then, with their sizes.
func FuzzUnusedIndex(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe})
	f.Add([]byte{3, 3, 3, 0x83, 0x47, 0x12, 0x99, 0xff, 0x00, 0x31})
	f.Fuzz(func(t *testing.T, ops []byte) {
		setNames := []string{"x", "y", "z"}
		secretNames := []string{"a", "b", "c", "d"}
		x := NewUnusedIndex(sys)
		sets := map[string]*olmv1.ClusterObjectSet{}
		secrets := map[string]*corev1.Secret{}
		sizes := map[string]int64{}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			switch op % 4 {
			case 0: // a set added or changed: its UID generation, liveness and refs from arg
				name := setNames[int(op/4)%len(setNames)]
				var refs []string
				for j, s := range secretNames {
					if arg&(1<<j) != 0 {
						refs = append(refs, s)
					}
				}
				if arg&0x40 != 0 && len(refs) > 0 {
					refs[0] = "other/" + refs[0]
				}
				c := indexedCOS(name, fmt.Sprintf("%s-%d", name, arg>>7), arg&0x10 != 0, refs...)
				sets[name] = c
				x.SetClusterObjectSet(c.DeepCopy())
			case 1:
				name := setNames[int(op/4)%len(setNames)]
				delete(sets, name)
				x.DeleteClusterObjectSet(name)
			case 2: // a Secret added or changed: type, owners and size from arg
				name := secretNames[int(op/4)%len(secretNames)]
				typ := corev1.SecretType(olmv1.SecretTypeObjectData)
				if arg&1 != 0 {
					typ = corev1.SecretTypeOpaque
				}
				var owners []string
				for j, s := range setNames {
					if arg&(2<<j) != 0 {
						owners = append(owners, fmt.Sprintf("%s-%d", s, arg>>7))
					}
				}
				sec := idxSecret(sys, name, typ, owners...)
				secrets[name], sizes[name] = sec, int64(arg>>4)
				x.SetSecret(sec.DeepCopy(), sizes[name])
			case 3:
				name := secretNames[int(op/4)%len(secretNames)]
				delete(secrets, name)
				x.DeleteSecret(types.NamespacedName{Namespace: sys, Name: name})
			}
			var allSets []olmv1.ClusterObjectSet
			for _, c := range sets {
				allSets = append(allSets, *c)
			}
			var allSecrets []corev1.Secret
			for _, s := range secrets {
				allSecrets = append(allSecrets, *s)
			}
			want := []string{}
			var wantBytes int64
			for _, s := range UnusedSecrets(allSecrets, allSets, sys) {
				want = append(want, s.Name)
				wantBytes += sizes[s.Name]
			}
			slices.Sort(want)
			n, bytes := x.Unused()
			if diff := cmp.Diff(want, x.UnusedNames()); diff != "" || bytes != wantBytes || n != len(want) {
				t.Fatalf("after op %d: unused (-UnusedSecrets +index):\n%s\nbytes %d, want %d; count %d", i/2, diff, bytes, wantBytes, n)
			}
			for _, s := range secretNames {
				key := types.NamespacedName{Namespace: sys, Name: s}
				if x.IsUnused(key) != slices.Contains(want, s) || x.Exists(key) != (secrets[s] != nil) {
					t.Fatalf("after op %d: Secret %s: IsUnused %v, Exists %v", i/2, s, x.IsUnused(key), x.Exists(key))
				}
			}
		}
	})
}
