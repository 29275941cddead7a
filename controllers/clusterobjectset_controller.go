// Package controllers holds the companion reconciler of ClusterObjectSets, one controller per
// concern: the rollout/teardown controller (ClusterObjectSetReconciler, only where this manager rolls
// out: it resolves refs, rolls phases out in order with server-side apply, waits for readiness probes,
// enforces collision protection, hands objects over between revisions, archives and tears down), the
// release of our teardown finalizer where it does not (FinalizerReleaseReconciler), Secret ownership
// (SecretOwnershipReconciler) and the orphan sweep (OrphanSweeper), both always. Decisions are pure
// functions of controllers/reconciler/rollout, controllers/reconciler/recheck, controllers/reconciler/conditions, internal/phasedigest,
// controllers/reconciler/probes, internal/collision, controllers/reconciler/crdcleanup, controllers/reconciler/drift and internal/content;
// this package reads, calls them and writes.
//
// The rollout controller's files go by job: this one sets up and runs one reconcile,
// clusterobjectset_rollout.go applies phases (collision, adoption), clusterobjectset_status.go turns
// what a reconcile found into the status and Events, clusterobjectset_archive.go archives
// predecessors, clusterobjectset_deletion.go tears down, resolve.go resolves refs.
package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/conditions"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/recheck"
	"github.com/cos-externalizer/cos-externalizer/internal/finalizerowner"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// Every write to a ClusterObjectSet is a patch; update on finalizers lets the owner references of
// the object-data Secrets block their owner's deletion.
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterobjectsets,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterobjectsets/status,verbs=get;patch
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterobjectsets/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Refs may name Secrets of any namespace; those are read uncached, one by one (the system namespace's
// own Secrets have a Role: webhook/externalize.go):
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// The objects a ClusterObjectSet manages can be of any kind: that rule is a ClusterRole of its own
// (package controllers/rolloutrbac), bound only where this manager rolls out.

const (
	// FieldOwner is the server-side apply field manager of every managed object, and of the finalizer.
	FieldOwner = finalizerowner.OurFieldManager
	// Finalizer holds an Active ClusterObjectSet until its objects are torn down.
	Finalizer = finalizerowner.Teardown

	// DefaultDriftCheckInterval is the default ClusterObjectSetReconciler.DriftCheck (--drift-check-interval).
	DefaultDriftCheckInterval = 10 * time.Minute
	// DefaultExternalRefCheckInterval is the default ClusterObjectSetReconciler.ExternalRefCheck
	// (--external-ref-check-interval).
	DefaultExternalRefCheckInterval = time.Minute
	// conflictRetry is how soon a reconcile that lost a write race runs again.
	conflictRetry = 200 * time.Millisecond
)

// ClusterObjectSetReconciler rolls ClusterObjectSets out and tears them down. It is registered only
// where this manager rolls out; FinalizerReleaseReconciler takes its place where it does not.
type ClusterObjectSetReconciler struct {
	// Client reads from the manager's cache: ClusterObjectSets, managed objects (by label) and the
	// metadata of object-data Secrets of the system namespace.
	Client client.Client
	// APIReader reads uncached: objects not (yet) carrying our label, Secrets of other namespaces, and
	// the content of object-data Secrets.
	APIReader       client.Reader
	Recorder        events.EventRecorder
	Clock           clock.PassiveClock
	SystemNamespace string
	// KeepArchived is how many archived revisions of one owner are kept.
	KeepArchived int
	// DriftCheck is how often a rolled-out ClusterObjectSet is reconciled without an event (±10%),
	// to restore drift that no watch event showed; 0: events only.
	DriftCheck time.Duration
	// ExternalRefCheck is how often a rolled-out or Blocked ClusterObjectSet with refs outside the
	// system namespace (whose Secrets are not watched) re-verifies them (±10%); 0: never.
	ExternalRefCheck time.Duration
	// Resolve caps the total resolved content of the refs of one ClusterObjectSet
	// (--max-resolved-bytes), and its Pool what reconciles hold at once (--max-concurrent-resolved-bytes;
	// admission requests draw from a pool of their own; nil: none).
	Resolve secretdata.ResolveMemory
	Metrics *Metrics

	watches *kindWatches
	// contents keeps the data of the Secrets read for resolution (DefaultSecretContentBytes): the
	// cache holds their metadata only.
	contents *secretContents
}

// SetupWithManager registers the reconciler: ClusterObjectSets, the object-data Secrets behind their
// refs, and every kind of managed object (watched as it first appears), each mapped back to the
// ClusterObjectSet concerned. The manager's cache must have objectdata.RefIndex (objectdata.IndexRefs),
// which maps a Secret to the ClusterObjectSets that reference it.
func (r *ClusterObjectSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.contents = newSecretContents(DefaultSecretContentBytes)
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &olmv1.ClusterObjectSet{}, ownerIndex, ownerNames); err != nil {
		return fmt.Errorf("indexing ClusterObjectSets by owner: %w", err)
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		// Any change but our own status writes: metadata-only updates (a label, an annotation) re-verify
		// the phase digests, as upstream's reconciler does on every update.
		For(&olmv1.ClusterObjectSet{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, deletionPredicate()))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.cosForSecret)).
		Build(r)
	if err != nil {
		return err
	}
	r.watches = &kindWatches{ctrl: c, cache: mgr.GetCache()}
	return nil
}

// Reconcile brings one ClusterObjectSet closer to its desired state and reports it in its status.
// Writes to the ClusterObjectSet are guarded by its resourceVersion: a conflict means the cache was
// behind, and the request is simply retried on the newer object.
func (r *ClusterObjectSetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("the ClusterObjectSet changed meanwhile; retrying", "error", err.Error())
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}

// reconcile tears down a deleted or archived ClusterObjectSet, and rolls out an Active one: it holds
// our finalizer, rolls out as far as it can, writes the status once, archives its predecessors once
// it has succeeded, and says when to look again.
func (r *ClusterObjectSetReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if done, err := r.archivedAndDone(ctx, req); err != nil || done {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cos := &olmv1.ClusterObjectSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, cos); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !cos.DeletionTimestamp.IsZero() || cos.Spec.LifecycleState == olmv1.LifecycleStateArchived {
		return r.reconcileTeardown(ctx, cos)
	}
	if err := r.ensureFinalizer(ctx, cos); err != nil {
		return reconcile.Result{}, err
	}
	before := cos.DeepCopy()
	found := r.rollOut(ctx, cos)
	outcome, events := r.setStatus(cos, found)
	if err := r.patchStatus(ctx, before, cos); err != nil {
		return reconcile.Result{}, err
	}
	r.recordEvents(cos, events)
	if outcome.Kind == conditions.Complete {
		if err := r.archivePredecessors(ctx, cos); err != nil {
			return reconcile.Result{}, err
		}
	}
	if found.err != nil {
		// Already shown in the status; the controller's backoff paces the retries.
		return reconcile.Result{}, found.err
	}
	deadline, _ := conditions.Deadline(cos)
	return reconcile.Result{RequeueAfter: r.recheckPolicy().After(recheck.Input{
		Kind: outcome.Kind, Deadline: deadline, RefsOutside: cos.RefsOutside(r.SystemNamespace),
	})}, nil
}

// archivedAndDone tells, from the cache's own object (not a copy), whether a reconcile of it would
// do nothing: it is archived, not being deleted, no longer holds our finalizer (its teardown is over)
// and its conditions already say Archived. Most ClusterObjectSets of a large cluster are such, and a
// restarted manager reconciles each once: this spares it two copies of each.
func (r *ClusterObjectSetReconciler) archivedAndDone(ctx context.Context, req reconcile.Request) (bool, error) {
	peek := &olmv1.ClusterObjectSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, peek, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	if peek.Spec.LifecycleState != olmv1.LifecycleStateArchived || !peek.DeletionTimestamp.IsZero() || controllerutil.ContainsFinalizer(peek, Finalizer) {
		return false, nil
	}
	// What reportTeardown would set, on a copy of the conditions alone.
	probe := *peek
	probe.Status.Conditions = slices.Clone(peek.Status.Conditions)
	conditions.Set(&probe, conditions.Outcome{Kind: conditions.Archived}, r.Clock.Now())
	return apiequality.Semantic.DeepEqual(peek.Status.Conditions, probe.Status.Conditions), nil
}

func (r *ClusterObjectSetReconciler) recheckPolicy() recheck.Policy {
	return recheck.Policy{Clock: r.Clock, DriftCheck: r.DriftCheck, ExternalRefCheck: r.ExternalRefCheck}
}

// ensureFinalizer adds our teardown finalizer, under our field manager, so that webhook-only mode
// (FinalizerReleaseReconciler) can tell ours from OLM's.
func (r *ClusterObjectSetReconciler) ensureFinalizer(ctx context.Context, cos *olmv1.ClusterObjectSet) error {
	if controllerutil.ContainsFinalizer(cos, Finalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(cos.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(cos, Finalizer)
	if err := r.Client.Patch(ctx, cos, patch, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("adding the finalizer: %w", err)
	}
	return nil
}

// removeFinalizer lets go of our teardown finalizer; a ClusterObjectSet already gone is fine.
func removeFinalizer(ctx context.Context, c client.Client, cos *olmv1.ClusterObjectSet, opts ...client.PatchOption) error {
	patch := client.MergeFromWithOptions(cos.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(cos, Finalizer)
	if err := c.Patch(ctx, cos, patch, opts...); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	return nil
}

// deletionPredicate passes the start of a deletion and changes of the finalizers.
func deletionPredicate() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero() || len(e.ObjectNew.GetFinalizers()) != len(e.ObjectOld.GetFinalizers())
	}}
}

// describe names an object in the reconciler's own errors, Events and logs: "Kind namespace/name",
// or "Kind name" when cluster-scoped; never content. Messages in upstream's words name objects as
// upstream does (probes.Identity, rollout.UpstreamRef).
func describe(o client.Object) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		// Typed objects read through a client carry no TypeMeta.
		switch o.(type) {
		case *olmv1.ClusterObjectSet:
			kind = olmv1.ClusterObjectSetKind
		case *corev1.Secret:
			kind = "Secret"
		}
	}
	return describeKey(kind, client.ObjectKeyFromObject(o))
}

// describeKey is describe for an object known by kind and key (naming.Key, the format of every
// component).
func describeKey(kind string, key client.ObjectKey) string {
	return naming.Key(kind, key.Namespace, key.Name)
}
