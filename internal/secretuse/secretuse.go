// Package secretuse is the one definition of who uses an object-data Secret, asked the same way by
// every component that deletes or guards one: the Secret guard, the orphan sweep, Secret ownership
// and the heal paths.
//
// A Secret is in use when a live ClusterObjectSet references it: one that exists, is not being
// deleted, and has a ref (api/v1 SecretRef) to the Secret's namespace and name. The revision-name
// label and the ownerReferences never decide it: they say who wrote the Secret and who the garbage
// collector deletes it with, not who reads it. So a ref copied from another ClusterObjectSet (kept as
// given by the webhook) protects the Secret exactly as its writer's does.
//
// Nothing in this package reads the cluster: callers pass what they observed (candidates from a
// cache, confirmed by a live read where a wrong "unused" would delete content).
package secretuse

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
)

// Use is a live ClusterObjectSet that references a Secret.
type Use struct {
	// Name and UID identify the ClusterObjectSet.
	Name string
	UID  types.UID
	// Path is the field path of its first ref to the Secret, for messages.
	Path string
}

// Live reports whether cos can use a Secret: it exists (non-nil) and is not being deleted.
func Live(cos *olmv1.ClusterObjectSet) bool {
	return cos != nil && cos.DeletionTimestamp.IsZero()
}

// Users returns the live ClusterObjectSets among sets that reference the Secret key, sorted by name.
// systemNamespace is what an empty ref.namespace means.
func Users(sets []olmv1.ClusterObjectSet, key types.NamespacedName, systemNamespace string) []Use {
	return BySecret(sets, systemNamespace)[key]
}

// BySecret returns the users (Users) of every Secret that sets reference, keyed by Secret, in one
// pass over sets: for callers that judge many Secrets against the same ClusterObjectSets.
func BySecret(sets []olmv1.ClusterObjectSet, systemNamespace string) map[types.NamespacedName][]Use {
	out := map[types.NamespacedName][]Use{}
	for i := range sets {
		cos := &sets[i]
		if !Live(cos) {
			continue
		}
		for _, key := range cos.ReferencedSecrets(systemNamespace) {
			path, _ := cos.RefTo(key.Namespace, key.Name, systemNamespace)
			out[key] = append(out[key], Use{Name: cos.Name, UID: cos.UID, Path: path})
		}
	}
	for _, users := range out {
		slices.SortFunc(users, func(a, b Use) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// OwnerRef is the owner reference of a ClusterObjectSet on a Secret it uses. blockOwnerDeletion is
// set, so a foreground deletion of the ClusterObjectSet waits for the garbage collector to decide
// the Secret: delete it when no other owner remains, or drop this reference otherwise.
func OwnerRef(u Use, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: u.Name, UID: u.UID,
		Controller: &controller, BlockOwnerDeletion: ptr.To(true),
	}
}

// Owners returns the ownerReferences an object-data Secret should have, and whether they differ from
// refs. users are the Secret's users (Users); label is its revision-name label (the ClusterObjectSet
// name, hashed when too long for a label value: naming.RevisionLabelValue), or ""; live reports whether the ClusterObjectSet of an owner reference is live (it
// exists with that uid and is not being deleted).
//
//   - A Secret that no live ClusterObjectSet uses is left as it is: its owners' deletion (the garbage
//     collector) or the orphan sweep decide it.
//   - A Secret controlled by something that is not a ClusterObjectSet is left as it is.
//   - Otherwise every user owns it, so the collector deletes it only once the last user is gone, and
//     references to ClusterObjectSets that are no longer live (deleted, being deleted, or an earlier
//     one of the same name) are dropped: the Secret no longer depends on them, so their deletion, in
//     the foreground too, never waits on content another ClusterObjectSet uses. The user its label
//     names is the controller; references to other live ClusterObjectSets and to other kinds stay.
func Owners(refs []metav1.OwnerReference, users []Use, label string, live func(types.UID) bool) ([]metav1.OwnerReference, bool) {
	if len(users) == 0 {
		return refs, false
	}
	for _, ref := range refs {
		if !collision.IsClusterObjectSetRef(ref) && ref.Controller != nil && *ref.Controller {
			return refs, false
		}
	}
	var out []metav1.OwnerReference
	change := false
	has := map[types.UID]bool{}
	controlled := false
	for _, ref := range refs {
		if collision.IsClusterObjectSetRef(ref) && !live(ref.UID) && !isUser(users, ref.UID) {
			change = true
			continue
		}
		if has[ref.UID] {
			change = true
			continue
		}
		has[ref.UID] = true
		if ref.Controller != nil && *ref.Controller {
			controlled = true
		}
		out = append(out, ref)
	}
	// The user the label names becomes the controller when nothing controls the Secret.
	for i := range out {
		if !controlled && collision.IsClusterObjectSetRef(out[i]) && naming.RevisionLabelValue(out[i].Name) == label && isUser(users, out[i].UID) {
			out[i].Controller = ptr.To(true)
			controlled, change = true, true
		}
	}
	for _, u := range users {
		if has[u.UID] {
			continue
		}
		controller := !controlled && naming.RevisionLabelValue(u.Name) == label
		controlled = controlled || controller
		out = append(out, OwnerRef(u, controller))
		change = true
	}
	if !change {
		return refs, false
	}
	return out, true
}

func isUser(users []Use, uid types.UID) bool {
	return slices.ContainsFunc(users, func(u Use) bool { return u.UID == uid })
}

// Unused reports whether the orphan sweep may consider an object-data Secret at all: nobody uses it
// (users is empty) and no existing ClusterObjectSet owns it (ownedByExisting: the garbage collector
// deletes it with that owner, after that owner's teardown has read it). Whether its grace period has
// passed is Sightings' to say.
func Unused(users []Use, ownedByExisting bool) bool {
	return len(users) == 0 && !ownedByExisting
}

// GuardUpdate decides whether the Secret guard refuses an update of a Secret that users use (after
// a live read): removing or changing its revision-name label (the manager's cache holds only
// labelled Secrets, so the users' refs would stop resolving), or removing an owner reference of one
// of its users (which would let the garbage collector take it first). Dropping references to
// ClusterObjectSets that are not users (gone, being deleted, an earlier one of the same name), as
// the garbage collector and Secret ownership do, and adding owners are allowed. It returns what the
// update would do, or "" when it is allowed.
func GuardUpdate(oldLabel, newLabel string, oldRefs, newRefs []metav1.OwnerReference, users []Use) string {
	if len(users) == 0 {
		return ""
	}
	if oldLabel != newLabel {
		return "change its " + olmv1.LabelRevisionName + " label"
	}
	for _, ref := range oldRefs {
		if !isUser(users, ref.UID) {
			continue
		}
		if !slices.ContainsFunc(newRefs, func(n metav1.OwnerReference) bool { return n.UID == ref.UID }) {
			return "remove its owner reference to ClusterObjectSet " + ref.Name
		}
	}
	return ""
}
