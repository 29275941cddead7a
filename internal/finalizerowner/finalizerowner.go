// Package finalizerowner decides, from a ClusterObjectSet's metadata alone, whose a finalizer is:
// the field managers that own its entry of metadata.finalizers (managedFields), and so whether
// uninstalling releases it. The teardown finalizer has one name for two controllers: ours (the field
// manager cos-externalizer) and OLM's operator-controller; only a finalizer our manager alone owns is
// ours to release. Nothing here reads the cluster.
package finalizerowner

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// The teardown finalizer and the field manager our rollout controller adds it under: one definition
// for every component that adds, judges or releases it (the reconciler, --rollout=auto, uninstall).
const (
	Teardown        = "olm.operatorframework.io/teardown"
	OurFieldManager = "cos-externalizer"
)

// Owners returns the field managers whose managedFields entries own finalizer (the element of the set
// metadata.finalizers), sorted, each once. An entry whose fieldsV1 cannot be read owns nothing.
func Owners(managed []metav1.ManagedFieldsEntry, finalizer string) []string {
	want := fieldpath.MakePathOrDie("metadata", "finalizers", value.NewValueInterface(finalizer))
	var out []string
	for _, mf := range managed {
		if mf.FieldsV1 == nil || slices.Contains(out, mf.Manager) {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err == nil && set.Has(want) {
			out = append(out, mf.Manager)
		}
	}
	slices.Sort(out)
	return out
}

// Action is what uninstalling does with a ClusterObjectSet's finalizer.
type Action string

const (
	// Absent: the ClusterObjectSet does not hold the finalizer; nothing to do.
	Absent Action = "absent"
	// Release: our field manager alone owns it; uninstalling removes it, without teardown.
	Release Action = "release"
	// Foreign: another field manager owns it, alone or with ours; it is left to that controller.
	Foreign Action = "foreign"
	// Unowned: it is held but no field manager owns it (managedFields cleared); it is left, for a
	// person to judge.
	Unowned Action = "unowned"
)

// Decision is what uninstalling does with one ClusterObjectSet's finalizer.
type Decision struct {
	Action Action
	// Owners are the field managers that own the finalizer (Owners), for Foreign.
	Owners []string
	// Keep is the finalizers list once ours is released (Release only): every other finalizer, in
	// order.
	Keep []string
}

// Decide says what uninstalling does with finalizer on a ClusterObjectSet that holds finalizers and
// has the managedFields managed, where ours is our field manager.
func Decide(finalizers []string, managed []metav1.ManagedFieldsEntry, finalizer, ours string) Decision {
	if !slices.Contains(finalizers, finalizer) {
		return Decision{Action: Absent}
	}
	owners := Owners(managed, finalizer)
	switch {
	case len(owners) == 0:
		return Decision{Action: Unowned}
	case len(owners) > 1 || owners[0] != ours:
		return Decision{Action: Foreign, Owners: owners}
	}
	keep := []string{}
	for _, f := range finalizers {
		if f != finalizer {
			keep = append(keep, f)
		}
	}
	return Decision{Action: Release, Owners: owners, Keep: keep}
}
