package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/rollout"
)

// archivePredecessors carries out rollout.Archive once cos has succeeded: it archives the older
// Active revisions of its owner and deletes the archived ones beyond KeepArchived. Each write is
// guarded by the uid and resourceVersion read.
func (r *ClusterObjectSetReconciler) archivePredecessors(ctx context.Context, cos *olmv1.ClusterObjectSet) error {
	owner := cos.Labels[olmv1.LabelOwnerName]
	if owner == "" {
		return nil
	}
	list := &olmv1.ClusterObjectSetList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{ownerIndex: owner}); err != nil {
		return fmt.Errorf("listing the revisions of %s: %w", owner, err)
	}
	archive, remove := rollout.Archive(cos, list.Items, r.KeepArchived)
	for _, other := range archive {
		patch := client.MergeFromWithOptions(other.DeepCopy(), client.MergeFromWithOptimisticLock{})
		other.Spec.LifecycleState = olmv1.LifecycleStateArchived
		if err := r.Client.Patch(ctx, other, patch); err != nil {
			return fmt.Errorf("archiving %s: %w", describe(other), err)
		}
		r.Recorder.Eventf(other, cos, corev1.EventTypeNormal, EventArchived, "Archive", "archived: revision %d (%s) succeeded", cos.Spec.Revision, describe(cos))
	}
	for _, old := range remove {
		// Exactly the archived revision that was judged: a ClusterObjectSet re-created under its name
		// since the cache was read, or changed since, is decided again on the next reconcile.
		err := r.Client.Delete(ctx, old, client.Preconditions{UID: &old.UID, ResourceVersion: &old.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting archived %s: %w", describe(old), err)
		}
	}
	return nil
}

// ownerIndex indexes the cached ClusterObjectSets by their owner-name label: a succeeded revision
// lists its owner's revisions on every reconcile, which a label selector would find by a pass over
// every ClusterObjectSet of the cluster.
const ownerIndex = "cos-externalizer.io/owner-name"

// ownerNames is the indexer of ownerIndex.
func ownerNames(obj client.Object) []string {
	if owner := obj.GetLabels()[olmv1.LabelOwnerName]; owner != "" {
		return []string{owner}
	}
	return nil
}
