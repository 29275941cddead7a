package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/conditions"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/crdcleanup"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/rollout"
)

// teardownPoll paces waiting for deleted objects to go, besides their watch events.
const teardownPoll = 2 * time.Second

// reconcileTeardown archives or deletes: in reverse phase order, it deletes the objects this revision
// still controls (no successor adopted them) and waits until they are gone, and removes itself from
// the owners of objects others control. Then it lets go of the finalizer.
func (r *ClusterObjectSetReconciler) reconcileTeardown(ctx context.Context, cos *olmv1.ClusterObjectSet) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if controllerutil.ContainsFinalizer(cos, Finalizer) {
		resolved, unres, release := r.resolve(ctx, cos)
		defer release()
		if unres.busy {
			// Other reconciles hold the reconciler's resolve pool (admission requests never do: they
			// have their own): its objects are not unresolvable, only not resolved yet. Tearing down
			// without them would leave them behind; what this one holds goes back before the requeue.
			log.Info("waiting for room to resolve the objects to tear down", "missing", unres.retryable)
			return reconcile.Result{RequeueAfter: teardownPoll}, nil
		}
		if unres.blocking != "" || unres.retryable != "" {
			// Objects behind unresolvable refs cannot be identified: they are left to the garbage
			// collector (their controller reference points at this ClusterObjectSet).
			log.Info("tearing down without some objects", "blocked", unres.blocking, "missing", unres.retryable)
		}
		for i := len(resolved) - 1; i >= 0; i-- {
			pending, err := r.tearDownPhase(ctx, cos, resolved[i])
			if err != nil {
				return reconcile.Result{}, err
			}
			if pending > 0 {
				log.V(1).Info("waiting for objects to be deleted", "phase", cos.Spec.Phases[i].Name, "pending", pending)
				if cos.DeletionTimestamp.IsZero() {
					// Archiving: say so, as upstream does.
					if err := r.reportTeardown(ctx, cos, conditions.Outcome{Kind: conditions.Retrying, Message: conditions.MessageTeardownInProgress}); err != nil {
						return reconcile.Result{}, err
					}
				}
				return reconcile.Result{RequeueAfter: teardownPoll}, nil
			}
		}
		if err := removeFinalizer(ctx, r.Client, cos); err != nil {
			return reconcile.Result{}, err
		}
	}
	if !cos.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.reportTeardown(ctx, cos, conditions.Outcome{Kind: conditions.Archived})
}

// tearDownPhase takes one step (rollout.Teardown) for every object of a phase that still exists, in
// reverse order, and returns how many the phase still waits for. Objects are read fresh, and deleted
// only under the resourceVersion read, so that one a successor adopts meanwhile stays.
func (r *ClusterObjectSetReconciler) tearDownPhase(ctx context.Context, cos *olmv1.ClusterObjectSet, objs []*unstructured.Unstructured) (pending int, err error) {
	for j := len(objs) - 1; j >= 0; j-- {
		if objs[j] == nil {
			continue // unresolvable: left to the garbage collector
		}
		live, err := r.readLive(ctx, objs[j])
		if err != nil {
			return pending, err
		}
		if live == nil {
			continue // gone
		}
		switch rollout.Teardown(live, cos.UID) {
		case rollout.Delete:
			pending++
			if err := r.Client.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground),
				client.Preconditions{UID: ptr.To(live.GetUID()), ResourceVersion: ptr.To(live.GetResourceVersion())}); client.IgnoreNotFound(err) != nil {
				// A conflict (changed since read, perhaps adopted) is retried by Reconcile.
				return pending, fmt.Errorf("deleting %s: %w", describe(live), err)
			}
		case rollout.AwaitDeletion:
			pending++
			if err := r.retriggerCRDCleanup(ctx, cos, live); err != nil {
				return pending, err
			}
		case rollout.Release:
			if err := r.dropOwner(ctx, live, cos); err != nil {
				return pending, err
			}
		}
	}
	return pending, nil
}

// retriggerCRDCleanup writes crdcleanup.Annotation on live, a CustomResourceDefinition this
// revision deleted, when the API server's cleanup of it failed to list its custom resources and a
// re-trigger is due (crdcleanup.Stalled: a few, further and further apart): the write makes the API
// server try again at once instead of minutes later. The write is a merge patch of the annotation
// alone. Anything else is left alone.
func (r *ClusterObjectSetReconciler) retriggerCRDCleanup(ctx context.Context, cos *olmv1.ClusterObjectSet, live *unstructured.Unstructured) error {
	retrigger, due := crdcleanup.Stalled(live, r.Clock.Now())
	if !due {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{crdcleanup.Annotation: retrigger.Annotation}}})
	if err != nil {
		return fmt.Errorf("re-triggering the cleanup of %s: %w", describe(live), err)
	}
	if err := r.Client.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldOwner)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("re-triggering the cleanup of %s: %w", describe(live), err)
	}
	r.Metrics.CRDCleanupRetriggers.Inc()
	ctrl.LoggerFrom(ctx).Info("re-triggered the API server's cleanup of a deleted CustomResourceDefinition", "object", describe(live), "reason", retrigger.Reason,
		"retrigger", retrigger.N, "maxRetriggers", crdcleanup.MaxRetriggers)
	r.Recorder.Eventf(cos, live, corev1.EventTypeWarning, EventCRDCleanupRetriggered, "Teardown",
		"the API server's cleanup of %s stalled (%s); re-triggered it (%d of at most %d)", describe(live), retrigger.Reason, retrigger.N, crdcleanup.MaxRetriggers)
	return nil
}

// dropOwner removes cos from the ownerReferences of an object it does not control.
func (r *ClusterObjectSetReconciler) dropOwner(ctx context.Context, live client.Object, cos *olmv1.ClusterObjectSet) error {
	refs := live.GetOwnerReferences()
	kept := refs[:0:0]
	for _, ref := range refs {
		if ref.UID != cos.UID {
			kept = append(kept, ref)
		}
	}
	if len(kept) == len(refs) {
		return nil
	}
	patch := client.MergeFrom(live.DeepCopyObject().(client.Object))
	live.SetOwnerReferences(kept)
	if err := r.Client.Patch(ctx, live, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing %s from the owners of %s: %w", describe(cos), describe(live), err)
	}
	return nil
}
