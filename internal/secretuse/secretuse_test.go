package secretuse

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
)

const sys = "olmv1-system"

func cos(name string, deleting bool, refs ...olmv1.ObjectSourceRef) olmv1.ClusterObjectSet {
	c := olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if deleting {
		c.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	}
	var objs []olmv1.ClusterObjectSetObject
	for _, r := range refs {
		objs = append(objs, olmv1.ClusterObjectSetObject{Ref: r})
	}
	if len(objs) > 0 {
		c.Spec.Phases = []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: objs}}
	}
	return c
}

func ref(ns, name string) olmv1.ObjectSourceRef {
	return olmv1.ObjectSourceRef{Namespace: ns, Name: name, Key: "k"}
}

func TestUsers(t *testing.T) {
	key := types.NamespacedName{Namespace: sys, Name: "xa-1-0123"}
	tests := map[string]struct {
		sets []olmv1.ClusterObjectSet
		want []string
	}{
		"none":       {},
		"its writer": {sets: []olmv1.ClusterObjectSet{cos("xa-1", false, ref("", key.Name))}, want: []string{"xa-1"}},
		"a ref copied by another, namespace given": {sets: []olmv1.ClusterObjectSet{cos("xb-1", false, ref(sys, key.Name))}, want: []string{"xb-1"}},
		"being deleted is not a user":              {sets: []olmv1.ClusterObjectSet{cos("xa-1", true, ref("", key.Name)), cos("xb-1", false, ref("", key.Name))}, want: []string{"xb-1"}},
		"another namespace is another Secret":      {sets: []olmv1.ClusterObjectSet{cos("xa-1", false, ref("other", key.Name))}},
		"sorted by name":                           {sets: []olmv1.ClusterObjectSet{cos("z", false, ref("", key.Name)), cos("a", false, ref("", key.Name))}, want: []string{"a", "z"}},
		"inline objects are no refs":               {sets: []olmv1.ClusterObjectSet{cos("xa-1", false)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, u := range Users(tc.sets, key, sys) {
				got = append(got, u.Name)
				if u.Path != "spec.phases[0].objects[0].ref" || u.UID != types.UID("uid-"+u.Name) {
					t.Errorf("use %+v", u)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("users (-want +got):\n%s", diff)
			}
		})
	}
}

func cosRef(name, uid string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: name,
		UID: types.UID("uid-" + uid), Controller: ptr.To(controller), BlockOwnerDeletion: ptr.To(true)}
}

func use(name, uid string) Use { return Use{Name: name, UID: types.UID("uid-" + uid)} }

func TestOwners(t *testing.T) {
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keeper", UID: "uid-cm"}
	otherController := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "uid-d", Controller: ptr.To(true)}
	// live: the uids of ClusterObjectSets that exist and are not being deleted.
	long := strings.Repeat("long-name-", 10)
	liveSet := map[types.UID]bool{"uid-x": true, "uid-b": true, "uid-c": true, "uid-nonuser": true}
	tests := map[string]struct {
		refs   []metav1.OwnerReference
		users  []Use
		label  string
		want   []metav1.OwnerReference
		change bool
	}{
		"no user: left to the collector and the sweep": {refs: []metav1.OwnerReference{cosRef("x", "gone", true)}, label: "x",
			want: []metav1.OwnerReference{cosRef("x", "gone", true)}},
		"its writer owns and controls it": {users: []Use{use("x", "x")}, label: "x",
			want: []metav1.OwnerReference{cosRef("x", "x", true)}, change: true},
		"already so": {refs: []metav1.OwnerReference{cosRef("x", "x", true)}, users: []Use{use("x", "x")}, label: "x",
			want: []metav1.OwnerReference{cosRef("x", "x", true)}},
		"re-created under the same name: the earlier uid is replaced": {refs: []metav1.OwnerReference{cosRef("x", "old", true)},
			users: []Use{use("x", "x")}, label: "x", want: []metav1.OwnerReference{cosRef("x", "x", true)}, change: true},
		"a copied ref: the other user owns it too, not as controller": {refs: []metav1.OwnerReference{cosRef("x", "x", true)},
			users: []Use{use("b", "b"), use("x", "x")}, label: "x",
			want: []metav1.OwnerReference{cosRef("x", "x", true), cosRef("b", "b", false)}, change: true},
		"its writer being deleted: its reference goes, the other user stays": {refs: []metav1.OwnerReference{cosRef("x", "deleting", true), cosRef("b", "b", false)},
			users: []Use{use("b", "b")}, label: "x", want: []metav1.OwnerReference{cosRef("b", "b", false)}, change: true},
		"its writer gone before the other user owned it": {refs: []metav1.OwnerReference{cosRef("x", "gone", true)},
			users: []Use{use("b", "b")}, label: "x", want: []metav1.OwnerReference{cosRef("b", "b", false)}, change: true},
		"a live owner that no longer uses it stays": {refs: []metav1.OwnerReference{cosRef("n", "nonuser", false)},
			users: []Use{use("x", "x")}, label: "x", want: []metav1.OwnerReference{cosRef("n", "nonuser", false), cosRef("x", "x", true)}, change: true},
		"other kinds of owner stay": {refs: []metav1.OwnerReference{other, cosRef("x", "old", true)}, users: []Use{use("x", "x")}, label: "x",
			want: []metav1.OwnerReference{other, cosRef("x", "x", true)}, change: true},
		"controlled by something else: left alone": {refs: []metav1.OwnerReference{otherController}, users: []Use{use("x", "x")}, label: "x",
			want: []metav1.OwnerReference{otherController}},
		"a user not named by the label never becomes controller": {users: []Use{use("b", "b")}, label: "x",
			want: []metav1.OwnerReference{cosRef("b", "b", false)}, change: true},
		"the label's user takes control once the old controller is gone": {refs: []metav1.OwnerReference{cosRef("x", "old", true), cosRef("x", "x", false)},
			users: []Use{use("x", "x")}, label: "x", want: []metav1.OwnerReference{cosRef("x", "x", true)}, change: true},
		"duplicate references are merged": {refs: []metav1.OwnerReference{cosRef("x", "x", true), cosRef("x", "x", true)},
			users: []Use{use("x", "x")}, label: "x", want: []metav1.OwnerReference{cosRef("x", "x", true)}, change: true},
		"a name too long for a label: the hashed label still names its controller": {users: []Use{use(long, "x")}, label: naming.RevisionLabelValue(long),
			want: []metav1.OwnerReference{cosRef(long, "x", true)}, change: true},
		"users in the order given": {users: []Use{use("b", "b"), use("c", "c")}, label: "x",
			want: []metav1.OwnerReference{cosRef("b", "b", false), cosRef("c", "c", false)}, change: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, change := Owners(tc.refs, tc.users, tc.label, func(uid types.UID) bool { return liveSet[uid] })
			if change != tc.change {
				t.Errorf("change = %v, want %v", change, tc.change)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("owner references (-want +got):\n%s", diff)
			}
			// Idempotent: the result needs no further change.
			if again, change := Owners(got, tc.users, tc.label, func(uid types.UID) bool { return liveSet[uid] }); change {
				t.Errorf("not idempotent: %v", again)
			}
			// Never more than one controller; every user owns it unless something else controls it.
			controllers := 0
			for _, r := range got {
				if r.Controller != nil && *r.Controller {
					controllers++
				}
			}
			if controllers > 1 {
				t.Errorf("%d controllers", controllers)
			}
			// What Owners produces, the guard lets through.
			if what := GuardUpdate(tc.label, tc.label, tc.refs, got, tc.users); what != "" {
				t.Errorf("the guard refuses the change Owners makes: %s", what)
			}
		})
	}
}

func TestUnused(t *testing.T) {
	tests := map[string]struct {
		users []Use
		owned bool
		want  bool
	}{
		"unused, unowned": {want: true},
		"used by a ClusterObjectSet that is not its writer":       {users: []Use{use("b", "b")}},
		"owned by an existing ClusterObjectSet (the collector's)": {owned: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Unused(tc.users, tc.owned); got != tc.want {
				t.Errorf("Unused = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGuardUpdate(t *testing.T) {
	users := []Use{use("x", "x")}
	tests := map[string]struct {
		oldLabel, newLabel string
		oldRefs, newRefs   []metav1.OwnerReference
		users              []Use
		want               string
	}{
		"unused: anything goes": {oldLabel: "x", newLabel: "", oldRefs: []metav1.OwnerReference{cosRef("x", "x", true)}},
		"label removed":         {oldLabel: "x", newLabel: "", users: users, want: "change its olm.operatorframework.io/revision-name label"},
		"label changed":         {oldLabel: "x", newLabel: "y", users: users, want: "change its olm.operatorframework.io/revision-name label"},
		"a user's owner reference removed": {oldLabel: "x", newLabel: "x", users: users,
			oldRefs: []metav1.OwnerReference{cosRef("x", "x", true)}, want: "remove its owner reference to ClusterObjectSet x"},
		"a non-user's reference dropped (the collector)": {oldLabel: "x", newLabel: "x", users: users,
			oldRefs: []metav1.OwnerReference{cosRef("x", "x", true), cosRef("a", "deleting", false)}, newRefs: []metav1.OwnerReference{cosRef("x", "x", true)}},
		"an owner added": {oldLabel: "x", newLabel: "x", users: users,
			oldRefs: []metav1.OwnerReference{cosRef("x", "x", true)}, newRefs: []metav1.OwnerReference{cosRef("x", "x", true), cosRef("b", "b", false)}},
		"controller flag changed": {oldLabel: "x", newLabel: "x", users: users,
			oldRefs: []metav1.OwnerReference{cosRef("x", "x", true)}, newRefs: []metav1.OwnerReference{cosRef("x", "x", false)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := GuardUpdate(tc.oldLabel, tc.newLabel, tc.oldRefs, tc.newRefs, tc.users); got != tc.want {
				t.Errorf("GuardUpdate = %q, want %q", got, tc.want)
			}
		})
	}
}
