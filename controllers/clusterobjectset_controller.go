// Package controllers holds the companion reconciler of ClusterObjectSets: it resolves refs, rolls
// phases out in order with server-side apply, waits for readiness probes, enforces collision
// protection, hands objects over between revisions, archives, owns the object-data Secrets and sweeps
// the orphaned ones. Decisions are pure functions of internal/probes, internal/collision,
// internal/conditions, internal/phasedigest, internal/crdcleanup, internal/drift and internal/content;
// this package reads, calls them and writes.
package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
	"github.com/cos-externalizer/cos-externalizer/internal/conditions"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/phasedigest"
	"github.com/cos-externalizer/cos-externalizer/internal/probes"
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
	// FieldOwner is the server-side apply field manager of every managed object.
	FieldOwner = "cos-externalizer"
	// Finalizer holds an Active ClusterObjectSet until its objects are torn down.
	Finalizer = "olm.operatorframework.io/teardown"

	// Event reasons.
	EventPhaseComplete = "PhaseComplete"
	EventSucceeded     = "Succeeded"
	EventBlocked       = "Blocked"
	EventRetrying      = "Retrying"
	EventArchived      = "Archived"
	EventAdopted       = "Adopted"
	// EventCRDCleanupRetriggered: teardown re-triggered the API server's stalled cleanup of a deleted CRD.
	EventCRDCleanupRetriggered = "CRDCleanupRetriggered"

	// fallbackRequeue bounds how long a rollout waits without an event; watches do the real work.
	fallbackRequeue = 2 * time.Minute
	// DefaultDriftCheckInterval is the default ClusterObjectSetReconciler.DriftCheck (--drift-check-interval).
	DefaultDriftCheckInterval = 10 * time.Minute
	// DefaultExternalRefCheckInterval is the default ClusterObjectSetReconciler.ExternalRefCheck
	// (--external-ref-check-interval).
	DefaultExternalRefCheckInterval = time.Minute
	// conflictRetry is how soon a reconcile that lost a write race runs again.
	conflictRetry = 200 * time.Millisecond
)

// ClusterObjectSetReconciler reconciles ClusterObjectSets.
type ClusterObjectSetReconciler struct {
	// Client reads from the manager's cache: ClusterObjectSets, managed objects (by label) and
	// object-data Secrets of the system namespace.
	Client client.Client
	// APIReader reads uncached: objects not (yet) carrying our label, Secrets of other namespaces.
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
	// MaxResolvedBytes caps the total resolved content of the refs of one ClusterObjectSet
	// (--max-resolved-bytes); 0 means content.DefaultMaxResolvedBytes.
	MaxResolvedBytes int64
	// ResolvePool bounds the resolved content held at once by reconciles and admission requests
	// (--max-concurrent-resolved-bytes); nil: none.
	ResolvePool *content.Pool

	// SkipNameValidation lets a process start the controller more than once (tests restart the
	// manager).
	SkipNameValidation bool
	// Rollout false is webhook-only mode: Secret ownership runs, rollout does not (another
	// reconciler, such as OLM's operator-controller, rolls out).
	Rollout bool

	watches *kindWatches
	applied appliedObjects
}

// SetupWithManager registers the reconciler: ClusterObjectSets, the object-data Secrets behind their
// refs, and every kind of managed object (watched as it first appears), each mapped back to the
// ClusterObjectSet concerned. The manager's cache must have objectdata.RefIndex (objectdata.IndexRefs),
// which maps a Secret to the ClusterObjectSets that reference it.
func (r *ClusterObjectSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		// Any change but our own status writes: metadata-only updates (a label, an annotation) re-verify
		// the phase digests, as upstream's reconciler does on every update.
		For(&olmv1.ClusterObjectSet{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, deletionPredicate()))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.cosForSecret)).
		WithOptions(controller.Options{SkipNameValidation: &r.SkipNameValidation}).
		Build(r)
	if err != nil {
		return err
	}
	r.watches = &kindWatches{ctrl: c, cache: mgr.GetCache(), scheme: mgr.GetScheme(), mapper: mgr.GetRESTMapper()}
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

func (r *ClusterObjectSetReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cos := &olmv1.ClusterObjectSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, cos); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return r.reconcileObject(ctx, cos)
}

// reconcileObject rolls out, tears down or, in webhook-only mode, releases our finalizer.
func (r *ClusterObjectSetReconciler) reconcileObject(ctx context.Context, cos *olmv1.ClusterObjectSet) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if !r.Rollout {
		// Webhook-only mode: nothing here tears down, so a finalizer this manager added while it
		// rolled out would hold a deleted ClusterObjectSet forever. Only our own is released: another
		// reconciler (OLM's) uses the same finalizer name and tears down itself.
		if !cos.DeletionTimestamp.IsZero() && finalizedByUs(cos) {
			patch := client.MergeFromWithOptions(cos.DeepCopy(), client.MergeFromWithOptimisticLock{})
			controllerutil.RemoveFinalizer(cos, Finalizer)
			if err := r.Client.Patch(ctx, cos, patch, client.FieldOwner(FieldOwner)); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("removing the finalizer: %w", err)
			}
			log.Info("released the finalizer without tearing down (--rollout=false)")
		}
		return reconcile.Result{}, nil
	}
	if !cos.DeletionTimestamp.IsZero() || cos.Spec.LifecycleState == olmv1.LifecycleStateArchived {
		return r.reconcileTeardown(ctx, cos)
	}
	if !controllerutil.ContainsFinalizer(cos, Finalizer) {
		patch := client.MergeFromWithOptions(cos.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(cos, Finalizer)
		// Under our field manager, so that webhook-only mode can tell our finalizer from OLM's.
		if err := r.Client.Patch(ctx, cos, patch, client.FieldOwner(FieldOwner)); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}

	before := cos.DeepCopy()
	outcome, requeue, err := r.rollOut(ctx, cos)
	if err != nil {
		outcome = conditions.Outcome{Kind: conditions.Retrying, Message: err.Error()}
	}
	outcome.Message = truncate(outcome.Message)
	r.recordTransitions(cos, before, outcome)
	now := r.Clock.Now()
	conditions.Set(cos, outcome, now)
	if err := r.patchStatus(ctx, before, cos); err != nil {
		return reconcile.Result{}, err
	}
	if outcome.Kind == conditions.Complete {
		if err := r.archivePredecessors(ctx, cos); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: r.recheckAfter(cos, r.DriftCheck)}, nil
	}
	if outcome.Kind == conditions.Blocked || outcome.Kind == conditions.Empty {
		// Blocked needs a person; an empty revision waits for its phases (a spec change). Secrets
		// outside the system namespace are not watched: a Blocked COS with refs there looks again,
		// so that restoring the Secret unblocks it.
		return reconcile.Result{RequeueAfter: r.recheckAfter(cos, 0)}, nil
	}
	if deadline, ok := conditions.Deadline(cos); ok && now.Before(deadline) && deadline.Sub(now) < requeue {
		requeue = deadline.Sub(now) + time.Second
	}
	if err != nil {
		// Errors already shown in the status; the controller's backoff paces the retries.
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// recheckAfter is when to reconcile a ClusterObjectSet again without an event (±10%), given how
// often it should be at the latest (0: never): Secrets outside the system namespace are not watched,
// so a COS with refs there is re-verified every ExternalRefCheck; 0 means no requeue.
func (r *ClusterObjectSetReconciler) recheckAfter(cos *olmv1.ClusterObjectSet, every time.Duration) time.Duration {
	if r.ExternalRefCheck > 0 && (every == 0 || r.ExternalRefCheck < every) && cos.RefsOutside(r.SystemNamespace) {
		every = r.ExternalRefCheck
	}
	if every == 0 {
		return 0
	}
	return wait.Jitter(every*9/10, 0.2)
}

// rollOut resolves the phases and applies them in order until one is not ready. It returns the
// outcome, when to look again without an event, and an error for API failures.
func (r *ClusterObjectSetReconciler) rollOut(ctx context.Context, cos *olmv1.ClusterObjectSet) (conditions.Outcome, time.Duration, error) {
	if len(cos.Spec.Phases) == 0 {
		// Not complete: a revision without phases must never archive its predecessor.
		return conditions.Outcome{Kind: conditions.Empty}, 0, nil
	}
	resolved, unres, release := r.resolve(ctx, cos)
	defer release()
	switch {
	case unres.blocking != "":
		return conditions.Outcome{Kind: conditions.Blocked, Message: unres.blocking}, 0, nil
	case unres.retryable != "":
		return conditions.Outcome{Kind: conditions.Retrying, Message: unres.retryable}, fallbackRequeue, nil
	}
	if msg, err := r.latchDigests(cos, resolved); err != nil {
		return conditions.Outcome{}, 0, err
	} else if msg != "" {
		return conditions.Outcome{Kind: conditions.Blocked, Message: msg}, 0, nil
	}
	self := revisionOf(cos)
	for i, phase := range cos.Spec.Phases {
		results := r.applyPhase(ctx, cos, self, i, resolved[i])
		// As upstream: every failed object and every collision of the phase is reported, and the
		// first object of the phase not ready yet.
		var failed []error
		var collisions []string
		waiting := ""
		for j, res := range results {
			switch {
			case res.err != nil:
				failed = append(failed, fmt.Errorf("reconciling %s: %w", objectRef(resolved[i][j]), res.err))
			case res.collision != "":
				collisions = append(collisions, fmt.Sprintf("%s\nAction: \"Collision\"\n%s", probes.Identity(resolved[i][j].Object), res.collision))
			case waiting == "":
				if p := probes.Evaluate(res.applied, cos.Spec.ProgressionProbes); !p.Ready {
					waiting = p.Message
				}
			}
		}
		if len(failed) > 0 {
			return conditions.Outcome{}, 0, fmt.Errorf("reconciling object: %w", errors.Join(failed...))
		}
		if len(collisions) > 0 {
			msg := fmt.Sprintf("revision object collisions in phase %d\n%s", i, strings.Join(collisions, "\n\n"))
			return conditions.Outcome{Kind: conditions.Retrying, Message: msg}, fallbackRequeue, nil
		}
		if waiting != "" {
			return conditions.Outcome{Kind: conditions.RollingOut, Message: waiting}, fallbackRequeue, nil
		}
		r.markPhaseComplete(cos, phase.Name)
	}
	return conditions.Outcome{Kind: conditions.Complete}, 0, nil
}

// objectRef names an object as upstream's reconcile errors do: "<group>/<version>, Kind=<Kind>
// <namespace>/<name>".
func objectRef(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GroupVersionKind(), o.GetNamespace(), o.GetName())
}

// applyResult is the outcome of applying one object.
type applyResult struct {
	applied   *unstructured.Unstructured
	collision string
	err       error
}

// applyConcurrency bounds the objects of a phase applied at once: a phase's objects are applied
// together, in no particular order.
const applyConcurrency = 8

// applyPhase applies the objects of phase i concurrently and returns their results in order.
func (r *ClusterObjectSetReconciler) applyPhase(ctx context.Context, cos *olmv1.ClusterObjectSet, self collision.Revision, i int, objs []*unstructured.Unstructured) []applyResult {
	phase := cos.Spec.Phases[i]
	results := make([]applyResult, len(objs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, applyConcurrency)
	for j, obj := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			protection := collision.Effective(cos.Spec.CollisionProtection, phase.CollisionProtection, phase.Objects[j].CollisionProtection)
			applied, msg, err := r.applyObject(ctx, cos, self, obj, protection)
			results[j] = applyResult{applied: applied, collision: msg, err: err}
		}()
	}
	wg.Wait()
	return results
}

// applyObject decides whether the object may be created or taken over, and applies it with
// server-side apply as the controller of it. A collision is returned as a message. An object that
// still holds what our last apply gave it is not applied again; it is read from the cache, so a
// settled reconcile makes no API request for it. Every decision to write is taken on a fresh read.
func (r *ClusterObjectSetReconciler) applyObject(ctx context.Context, cos *olmv1.ClusterObjectSet, self collision.Revision, obj *unstructured.Unstructured, protection olmv1.CollisionProtection) (*unstructured.Unstructured, string, error) {
	desired := obj.DeepCopy()
	labels := desired.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[olmv1.LabelOwningRevision] = content.RevisionLabelValue(cos.Name)
	desired.SetLabels(labels)
	desired.SetOwnerReferences([]metav1.OwnerReference{ownerRef(cos)})
	desired.SetResourceVersion("")
	desired.SetManagedFields(nil)
	digest, err := content.Canonical(desired.Object)
	if err != nil {
		return nil, "", err
	}
	// The apply below decodes its answer into desired, replacing desired.Object: keep the fields.
	shape := desired.Object
	key := appliedKey{cos: cos.UID, gvk: desired.GroupVersionKind(), name: client.ObjectKeyFromObject(desired)}

	existing, fresh, err := r.getLive(ctx, obj)
	if err != nil {
		return nil, "", err
	}
	if r.applied.unchanged(key, digest, shape, existing) {
		// Nothing changed since our last apply: neither what we apply nor the object at those fields.
		return existing, "", nil
	}
	if !fresh {
		if existing, err = r.readLive(ctx, obj); err != nil {
			return nil, "", err
		}
	}
	in := collision.Input{Protection: protection, Self: self}
	if existing != nil {
		meta := metaOf(existing)
		in.Existing = &meta
		if in.Controller, err = r.controllingRevision(ctx, existing); err != nil {
			return nil, "", err
		}
	}
	decision := collision.Decide(in)
	if decision.Verdict == collision.Collide {
		return nil, decision.Message, nil
	}
	if decision.Verdict == collision.Adopt {
		// Server-side apply adds our controller reference beside the one another manager set:
		// drop the other controller first, so there is one controller at any time.
		if err := r.dropOtherControllers(ctx, existing, cos.UID); err != nil {
			return nil, "", fmt.Errorf("taking %s over: %w", describe(obj), err)
		}
		r.Recorder.Eventf(cos, nil, corev1.EventTypeNormal, EventAdopted, "Adopt", "adopting %s: %s", describe(obj), decision.Message)
	}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return nil, "", sanitize(err)
	}
	r.applied.record(key, digest, shape, desired)
	if err := r.watches.ensure(ctx, desired.GroupVersionKind()); err != nil {
		return nil, "", err
	}
	return desired, "", nil
}

// dropOtherControllers removes controller ownerReferences other than ours, guarded by the
// resourceVersion it was read at.
func (r *ClusterObjectSetReconciler) dropOtherControllers(ctx context.Context, obj *unstructured.Unstructured, self types.UID) error {
	refs := obj.GetOwnerReferences()
	kept := refs[:0:0]
	for _, ref := range refs {
		if ref.Controller != nil && *ref.Controller && ref.UID != self {
			continue
		}
		kept = append(kept, ref)
	}
	if len(kept) == len(refs) {
		return nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
	obj.SetOwnerReferences(kept)
	return r.Client.Patch(ctx, obj, patch)
}

// cacheReadTimeout bounds a read from the cache: the first read of a kind starts its informer and
// waits for it to sync, which never happens if the kind stops being served meanwhile.
const cacheReadTimeout = 30 * time.Second

// getLive returns the object from the cache if it is there (objects carrying olmv1.LabelOwningRevision),
// else as the API server has it (fresh), or nil if it does not exist. A cached object may be behind.
func (r *ClusterObjectSetReconciler) getLive(ctx context.Context, obj *unstructured.Unstructured) (live *unstructured.Unstructured, fresh bool, err error) {
	live = &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	cctx, cancel := context.WithTimeout(ctx, cacheReadTimeout)
	err = r.Client.Get(cctx, client.ObjectKeyFromObject(obj), live)
	cancel()
	if err == nil {
		return live, false, nil
	}
	live, err = r.readLive(ctx, obj)
	return live, true, err
}

// readLive reads the object from the API server, uncached; nil if it does not exist.
func (r *ClusterObjectSetReconciler) readLive(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), live)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", describe(obj), err)
	}
	return live, nil
}

// controllingRevision returns the ClusterObjectSet that controls obj, if any and if it exists.
func (r *ClusterObjectSetReconciler) controllingRevision(ctx context.Context, obj *unstructured.Unstructured) (*collision.Revision, error) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != olmv1.ClusterObjectSetKind || ref.APIVersion != olmv1.GroupVersion.String() {
		return nil, nil
	}
	other := &olmv1.ClusterObjectSet{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, other); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if other.UID != ref.UID {
		return nil, nil
	}
	rev := revisionOf(other)
	return &rev, nil
}

func revisionOf(c *olmv1.ClusterObjectSet) collision.Revision {
	return collision.Revision{
		Name: c.Name, UID: c.UID, Revision: c.Spec.Revision, OwnerName: c.Labels[olmv1.LabelOwnerName],
		Active: c.Spec.LifecycleState == olmv1.LifecycleStateActive && c.DeletionTimestamp.IsZero(),
	}
}

func metaOf(u *unstructured.Unstructured) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), Labels: u.GetLabels(),
		OwnerReferences: u.GetOwnerReferences(), Generation: u.GetGeneration(),
	}
}

func ownerRef(c *olmv1.ClusterObjectSet) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: c.Name, UID: c.UID,
		Controller: &t, BlockOwnerDeletion: &t,
	}
}

// describe names an object for messages: kind, namespace and name, never content.
func describe(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}

// latchDigests records each phase's content digest (upstream's form, phasedigest.Of) the first
// time every phase resolves, and reports a phase whose content no longer matches its latched digest.
// Digests latched by earlier releases, in their own form, are verified as they are and kept.
func (r *ClusterObjectSetReconciler) latchDigests(cos *olmv1.ClusterObjectSet, resolved [][]*unstructured.Unstructured) (string, error) {
	phaseObjects := func(i int) []map[string]any {
		maps := make([]map[string]any, len(resolved[i]))
		for j, o := range resolved[i] {
			maps[j] = o.Object
		}
		return maps
	}
	if len(cos.Status.ObservedPhases) == 0 {
		for i, p := range cos.Spec.Phases {
			d, err := phasedigest.Of(p.Name, phaseObjects(i))
			if err != nil {
				return "", err
			}
			cos.Status.ObservedPhases = append(cos.Status.ObservedPhases, olmv1.ObservedPhase{Name: p.Name, Digest: d})
		}
		return "", nil
	}
	var mismatches []string
	for i, p := range cos.Spec.Phases {
		for _, o := range cos.Status.ObservedPhases {
			if o.Name != p.Name {
				continue
			}
			objs := phaseObjects(i)
			ok, err := phasedigest.Matches(o.Digest, p.Name, objs)
			if err != nil {
				return "", err
			}
			if !ok {
				got, err := phasedigest.Of(p.Name, objs)
				if err != nil {
					return "", err
				}
				mismatches = append(mismatches, fmt.Sprintf("phase %q (expected digest %s, got %s)", p.Name, o.Digest, got))
			}
		}
	}
	if len(mismatches) > 0 {
		// Upstream's verifyObservedPhases message.
		return fmt.Sprintf("resolved content of %d phase(s) has changed: %s; a referenced object source may have been deleted and recreated with different content",
			len(mismatches), strings.Join(mismatches, "; ")), nil
	}
	return "", nil
}

func (r *ClusterObjectSetReconciler) markPhaseComplete(cos *olmv1.ClusterObjectSet, name string) {
	for i := range cos.Status.ObservedPhases {
		o := &cos.Status.ObservedPhases[i]
		if o.Name == name && o.CompletedAt.IsZero() {
			o.CompletedAt = metav1.NewTime(r.Clock.Now())
			r.Recorder.Eventf(cos, nil, corev1.EventTypeNormal, EventPhaseComplete, "RollOut", "phase %q is rolled out and ready", name)
		}
	}
}

// recordTransitions emits an Event for every Blocked or Retrying cause and for success.
func (r *ClusterObjectSetReconciler) recordTransitions(cos, before *olmv1.ClusterObjectSet, o conditions.Outcome) {
	prev := apimeta.FindStatusCondition(before.Status.Conditions, olmv1.ConditionProgressing)
	same := func(reason, msg string) bool { return prev != nil && prev.Reason == reason && prev.Message == msg }
	switch {
	case o.Kind == conditions.Blocked && !same(olmv1.ReasonBlocked, o.Message):
		r.Recorder.Eventf(cos, nil, corev1.EventTypeWarning, EventBlocked, "RollOut", "%s", o.Message)
	case o.Kind == conditions.Retrying && !same(olmv1.ReasonRetrying, o.Message):
		r.Recorder.Eventf(cos, nil, corev1.EventTypeWarning, EventRetrying, "RollOut", "%s", o.Message)
	case o.Kind == conditions.Complete && !apimeta.IsStatusConditionTrue(before.Status.Conditions, olmv1.ConditionSucceeded):
		r.Recorder.Eventf(cos, nil, corev1.EventTypeNormal, EventSucceeded, "RollOut", "every phase is rolled out and ready")
	}
}

// patchStatus writes the status once, if it changed.
func (r *ClusterObjectSetReconciler) patchStatus(ctx context.Context, before, cos *olmv1.ClusterObjectSet) error {
	if apiequality.Semantic.DeepEqual(before.Status, cos.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, cos, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching the status: %w", err)
	}
	return nil
}

// archivePredecessors archives the older Active revisions of the same owner once this one has
// succeeded, and deletes archived revisions beyond KeepArchived.
func (r *ClusterObjectSetReconciler) archivePredecessors(ctx context.Context, cos *olmv1.ClusterObjectSet) error {
	owner := cos.Labels[olmv1.LabelOwnerName]
	if owner == "" {
		return nil
	}
	list := &olmv1.ClusterObjectSetList{}
	if err := r.Client.List(ctx, list, client.MatchingLabels{olmv1.LabelOwnerName: owner}); err != nil {
		return err
	}
	var archived []*olmv1.ClusterObjectSet
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == cos.UID || !other.DeletionTimestamp.IsZero() {
			continue
		}
		if other.Spec.LifecycleState == olmv1.LifecycleStateActive && other.Spec.Revision < cos.Spec.Revision {
			patch := client.MergeFromWithOptions(other.DeepCopy(), client.MergeFromWithOptimisticLock{})
			other.Spec.LifecycleState = olmv1.LifecycleStateArchived
			if err := r.Client.Patch(ctx, other, patch); err != nil {
				return fmt.Errorf("archiving %s: %w", other.Name, err)
			}
			r.Recorder.Eventf(other, cos, corev1.EventTypeNormal, EventArchived, "Archive", "archived: revision %d (%s) succeeded", cos.Spec.Revision, cos.Name)
		}
		if other.Spec.LifecycleState == olmv1.LifecycleStateArchived {
			archived = append(archived, other)
		}
	}
	sort.Slice(archived, func(i, j int) bool { return archived[i].Spec.Revision > archived[j].Spec.Revision })
	for _, old := range archived[min(len(archived), r.KeepArchived):] {
		if err := r.Client.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting archived revision %s: %w", old.Name, err)
		}
	}
	return nil
}

// finalizedByUs reports whether our field manager added the teardown finalizer (managedFields), as
// this manager does; OLM's reconciler adds a finalizer of the same name under its own manager.
func finalizedByUs(cos *olmv1.ClusterObjectSet) bool {
	if !controllerutil.ContainsFinalizer(cos, Finalizer) {
		return false
	}
	want := fieldpath.MakePathOrDie("metadata", "finalizers", value.NewValueInterface(Finalizer))
	for _, mf := range cos.ManagedFields {
		if mf.Manager != FieldOwner || mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(mf.FieldsV1.Raw)); err == nil && set.Has(want) {
			return true
		}
	}
	return false
}

func deletionPredicate() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero() || len(e.ObjectNew.GetFinalizers()) != len(e.ObjectOld.GetFinalizers())
	}}
}
