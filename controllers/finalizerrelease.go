package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/finalizerowner"
)

// FinalizerReleaseReconciler takes the rollout controller's place where this manager does not roll
// out (--rollout=false): nothing there tears down, so a teardown finalizer this manager added while it
// rolled out would hold a deleted ClusterObjectSet forever. It releases that finalizer, without
// tearing down: the objects still go with the ClusterObjectSet through the garbage collector. Only
// ours is released (finalizedByUs): another reconciler (OLM's) uses the same finalizer name and tears
// down itself. It writes nothing else: no status, no finalizer added.
type FinalizerReleaseReconciler struct {
	Client client.Client
}

// SetupWithManager registers the controller for ClusterObjectSets being deleted.
func (r *FinalizerReleaseReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("finalizer-release").
		For(&olmv1.ClusterObjectSet{}, builder.WithPredicates(beingDeleted())).
		Complete(r)
}

// beingDeleted passes the events of objects being deleted (those that exist at start-up included),
// but not their final deletion.
func beingDeleted() predicate.Predicate {
	deleting := func(o client.Object) bool { return !o.GetDeletionTimestamp().IsZero() }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return deleting(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return deleting(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(e event.GenericEvent) bool { return deleting(e.Object) },
	}
}

// Reconcile releases our finalizer from a ClusterObjectSet being deleted.
func (r *FinalizerReleaseReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cos := &olmv1.ClusterObjectSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, cos); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if cos.DeletionTimestamp.IsZero() || !finalizedByUs(cos) {
		return reconcile.Result{}, nil
	}
	if err := removeFinalizer(ctx, r.Client, cos, client.FieldOwner(FieldOwner)); err != nil {
		return reconcile.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("released the finalizer without tearing down (--rollout=false)")
	return reconcile.Result{}, nil
}

// finalizedByUs reports whether the teardown finalizer is ours alone to release, as uninstalling
// judges it (finalizerowner.Decide): our field manager added it (managedFields), as the rollout
// controller does, and no other owns it; OLM's reconciler adds a finalizer of the same name under its
// own manager, and one it shares with us is left to it (it tears down, then removes it).
func finalizedByUs(cos *olmv1.ClusterObjectSet) bool {
	return finalizerowner.Decide(cos.Finalizers, cos.ManagedFields, Finalizer, FieldOwner).Action == finalizerowner.Release
}
