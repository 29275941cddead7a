package rollout

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Step is what teardown does with one object of the revision it tears down.
type Step int

const (
	// Release: another controls the object (a successor adopted it, or it was never ours): the
	// revision only removes itself from its owners.
	Release Step = iota
	// Delete: the revision controls it; delete it and wait until it is gone.
	Delete
	// AwaitDeletion: the revision controls it and it is being deleted; wait (a stalled cleanup of a
	// CustomResourceDefinition may need a re-trigger: crdcleanup.Stalled).
	AwaitDeletion
)

// Teardown decides the step for live, the object as the API server has it (read fresh: a cached copy
// could still show self as the controller of an object a successor has just adopted), when the
// ClusterObjectSet self tears down. Objects of steps Delete and AwaitDeletion keep the teardown
// waiting.
func Teardown(live metav1.Object, self types.UID) Step {
	ref := metav1.GetControllerOfNoCopy(live)
	switch {
	case ref == nil || ref.UID != self:
		return Release
	case live.GetDeletionTimestamp() == nil:
		return Delete
	default:
		return AwaitDeletion
	}
}
