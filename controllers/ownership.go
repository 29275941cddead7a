package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
)

// SecretOwnershipReconciler keeps the ownerReferences of the object-data Secrets of the system
// namespace in step with who uses them (internal/secretuse): every live ClusterObjectSet that
// references a Secret owns it, the one its revision-name label names as its controller, and
// references to ClusterObjectSets that are gone, being deleted or an earlier one of the same name are
// dropped once a live user owns it. So the garbage collector deletes a Secret with its last user,
// never before, and deleting a ClusterObjectSet (background, foreground or orphan) never waits on a
// Secret that another ClusterObjectSet uses. It runs whether or not this manager rolls out, on the
// leader, one Secret at a time; it is level-based and idempotent.
type SecretOwnershipReconciler struct {
	// Client reads through the manager's cache (with objectdata.RefIndex) and writes.
	Client          client.Client
	SystemNamespace string
	Metrics         *Metrics
}

// SetupWithManager registers the controller: the labelled Secrets of the system namespace, and the
// ClusterObjectSets mapped to the Secrets they reference (their creation, deletion and the start of
// their deletion change who uses those Secrets).
func (r *SecretOwnershipReconciler) SetupWithManager(mgr ctrl.Manager) error {
	inSystem := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, labelled := o.GetLabels()[olmv1.LabelRevisionName]
		return o.GetNamespace() == r.SystemNamespace && labelled
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("secret-ownership").
		For(&corev1.Secret{}, builder.WithPredicates(inSystem)).
		Watches(&olmv1.ClusterObjectSet{}, handler.EnqueueRequestsFromMapFunc(r.secretsOf)).
		Complete(r)
}

// secretsOf maps a ClusterObjectSet to the Secrets of the system namespace it references.
func (r *SecretOwnershipReconciler) secretsOf(_ context.Context, obj client.Object) []reconcile.Request {
	cos, ok := obj.(*olmv1.ClusterObjectSet)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, key := range cos.ReferencedSecrets(r.SystemNamespace) {
		if key.Namespace == r.SystemNamespace {
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

// Reconcile brings one Secret's ownerReferences to what secretuse.Owners says. A write is guarded by
// the resourceVersion read: a conflict is retried on the newer Secret.
func (r *SecretOwnershipReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	sec := &corev1.Secret{}
	if err := r.Client.Get(ctx, req.NamespacedName, sec); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if sec.Type != olmv1.SecretTypeObjectData || !sec.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	referrers, err := objectdata.Referrers(ctx, r.Client, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	users := secretuse.Users(referrers, req.NamespacedName, r.SystemNamespace)
	live, err := r.liveOwners(ctx, sec)
	if err != nil {
		return reconcile.Result{}, err
	}
	refs, change := secretuse.Owners(sec.OwnerReferences, users, sec.Labels[olmv1.LabelRevisionName], func(uid types.UID) bool { return live[uid] })
	if !change {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFromWithOptions(sec.DeepCopy(), client.MergeFromWithOptimisticLock{})
	sec.OwnerReferences = refs
	if err := r.Client.Patch(ctx, sec, patch); err != nil {
		switch {
		case apierrors.IsConflict(err):
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		case apierrors.IsNotFound(err):
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("owning %s: %w", describe(sec), err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("owner references of an object-data Secret set", "secret", klog.KObj(sec), "users", len(users))
	r.Metrics.OwnerRefsPatched.Inc()
	return reconcile.Result{}, nil
}

// liveOwners returns the uids among sec's ClusterObjectSet owners that are live (in the cache: the
// ClusterObjectSet of that name has that uid and is not being deleted).
func (r *SecretOwnershipReconciler) liveOwners(ctx context.Context, sec *corev1.Secret) (map[types.UID]bool, error) {
	live := map[types.UID]bool{}
	for _, ref := range sec.OwnerReferences {
		if !collision.IsClusterObjectSetRef(ref) {
			continue
		}
		cos := &olmv1.ClusterObjectSet{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, cos); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if cos.UID == ref.UID && secretuse.Live(cos) {
			live[ref.UID] = true
		}
	}
	return live, nil
}
