package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/conditions"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/drift"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/probes"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/rollout"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/phasedigest"
)

// rolloutFound is what one pass of the rollout found, for the status to report: the outcome, the
// phase digests latched for the first time, the phases rolled out and ready (each with when it was
// seen so: before the next phase is applied), and API failures.
type rolloutFound struct {
	outcome   conditions.Outcome
	latched   []olmv1.ObservedPhase
	completed []completedPhase
	err       error
}

// completedPhase is a phase whose every object passed its probes, and when the rollout saw it.
type completedPhase struct {
	name string
	at   time.Time
}

// rollOut resolves the phases, verifies (or latches) their digests and applies them in order until
// one is not done (rollout.Phase). It does not change cos: the status reports what it found.
func (r *ClusterObjectSetReconciler) rollOut(ctx context.Context, cos *olmv1.ClusterObjectSet) rolloutFound {
	if len(cos.Spec.Phases) == 0 {
		// Not complete: a revision without phases must never archive its predecessor.
		return rolloutFound{outcome: conditions.Outcome{Kind: conditions.Empty}}
	}
	resolved, unres, release := r.resolve(ctx, cos)
	defer release()
	switch {
	case unres.blocking != "":
		return rolloutFound{outcome: conditions.Outcome{Kind: conditions.Blocked, Message: unres.blocking}}
	case unres.retryable != "":
		return rolloutFound{outcome: conditions.Outcome{Kind: conditions.Retrying, Message: unres.retryable}}
	}
	phases := make([]phasedigest.Phase, len(cos.Spec.Phases))
	for i, p := range cos.Spec.Phases {
		phases[i] = phasedigest.Phase{Name: p.Name, Objects: make([]map[string]any, len(resolved[i]))}
		for j, o := range resolved[i] {
			phases[i].Objects[j] = o.Object
		}
	}
	latched, mismatch, err := phasedigest.Latch(cos.Status.ObservedPhases, phases)
	if err != nil {
		return rolloutFound{err: err}
	}
	found := rolloutFound{latched: latched}
	if mismatch != "" {
		found.outcome = conditions.Outcome{Kind: conditions.Blocked, Message: mismatch}
		return found
	}
	self := revisionOf(cos)
	for i, phase := range cos.Spec.Phases {
		v := rollout.Phase(i, r.applyPhase(ctx, cos, self, i, resolved[i]), cos.Spec.ProgressionProbes)
		if v.Err != nil {
			found.err = v.Err
			return found
		}
		if !v.Done {
			found.outcome = v.Outcome
			return found
		}
		found.completed = append(found.completed, completedPhase{name: phase.Name, at: r.Clock.Now()})
	}
	found.outcome = conditions.Outcome{Kind: conditions.Complete}
	return found
}

// applyConcurrency bounds the objects of a phase applied at once: a phase's objects are applied
// together, in no particular order.
const applyConcurrency = 8

// applyPhase applies the objects of phase i concurrently and returns their results in order.
func (r *ClusterObjectSetReconciler) applyPhase(ctx context.Context, cos *olmv1.ClusterObjectSet, self collision.Revision, i int, objs []*unstructured.Unstructured) []rollout.Applied {
	phase := cos.Spec.Phases[i]
	results := make([]rollout.Applied, len(objs))
	// applyConcurrency workers take the objects in turn (rather than a goroutine per object: each
	// new goroutine grows its stack again for the decisions' recursion, 3% of a restart's CPU).
	next := make(chan int, len(objs))
	for j := range objs {
		next <- j
	}
	close(next)
	var wg sync.WaitGroup
	for range min(applyConcurrency, len(objs)) {
		wg.Go(func() {
			for j := range next {
				protection := collision.Effective(cos.Spec.CollisionProtection, phase.CollisionProtection, phase.Objects[j].CollisionProtection)
				live, msg, err := r.applyObject(ctx, cos, self, objs[j], protection)
				results[j] = rollout.Applied{Desired: objs[j], Live: live, Collision: msg, Err: err}
			}
		})
	}
	wg.Wait()
	return results
}

// applyObject decides whether the object may be created or taken over, and applies it with
// server-side apply as the controller of it. A collision is returned as a message. An object that
// holds what would be applied (unchanged: our digest annotation and our fields) is not applied; it
// is read from the cache, so a settled reconcile makes no API request for it. Every decision to write
// is taken on a fresh read.
func (r *ClusterObjectSetReconciler) applyObject(ctx context.Context, cos *olmv1.ClusterObjectSet, self collision.Revision, obj *unstructured.Unstructured, protection olmv1.CollisionProtection) (*unstructured.Unstructured, string, error) {
	desired := obj.DeepCopy()
	labels := desired.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[olmv1.LabelOwningRevision] = naming.RevisionLabelValue(cos.Name)
	desired.SetLabels(labels)
	desired.SetOwnerReferences([]metav1.OwnerReference{ownerRef(cos)})
	desired.SetResourceVersion("")
	desired.SetManagedFields(nil)
	// The digest covers everything applied but itself: labels and owner reference included, so a
	// hand-over to another revision changes it.
	canonical, err := content.Canonical(desired.Object)
	if err != nil {
		return nil, "", err
	}
	digest := drift.Digest(canonical)
	annotations := desired.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[drift.Annotation] = digest
	desired.SetAnnotations(annotations)
	// The apply below decodes its answer into desired, replacing desired.Object: keep the fields.
	fields := desired.Object

	existing, verdict, fresh, err := r.cachedLive(ctx, cos, obj, fields, digest)
	if err != nil {
		return nil, "", err
	}
	if !verdict.Unchanged && !fresh {
		// The cache may be behind (our own last apply, a drift already restored): decide on a fresh read.
		if existing, err = r.readLive(ctx, obj); err != nil {
			return nil, "", err
		}
		verdict = unchanged(fields, existing, digest)
	}
	if verdict.Unchanged {
		r.Metrics.AppliesSkipped.Inc()
		// A restarted manager starts its watches here too: drift after a restart must wake the COS.
		if err := r.watches.ensure(ctx, desired.GroupVersionKind()); err != nil {
			return nil, "", err
		}
		return existing, "", nil
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
	ctrl.LoggerFrom(ctx).V(1).Info("applying", "object", describe(obj), "reason", verdict.Reason, "field", verdict.Field)
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return nil, "", sanitize(err)
	}
	r.Metrics.AppliesPerformed.WithLabelValues(verdict.Reason).Inc()
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

// cachedLive returns the object as the no-op decision and the probes need it, with the decision
// (unchanged: fields are the desired object's, digest its drift.Digest). The cache holds managed
// objects (those carrying olmv1.LabelOwningRevision) as metadata, which settles the decision for
// most objects and the probes for kinds nobody probes; where the decision needs a field's value
// (drift.UnchangedMetadata) or a probe the object's content (probes.NeedsContent), the whole object is
// read from the cache of whole objects of its kind, started on first use, at the resourceVersion of
// the metadata, with managedFields from the metadata. An object not in the cache, or whose two cached
// copies differ, is read from the API server (fresh); nil if it does not exist. A cached object may
// be behind.
func (r *ClusterObjectSetReconciler) cachedLive(ctx context.Context, cos *olmv1.ClusterObjectSet, obj *unstructured.Unstructured, fields map[string]any, digest string) (live *unstructured.Unstructured, verdict drift.Verdict, fresh bool, err error) {
	// The metadata is read without a copy (metadataObject copies what it reads, and nothing here
	// changes meta): a restart reads each managed object once, and the copies were garbage the
	// collector paid for.
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(obj.GroupVersionKind())
	if r.getCached(ctx, obj, meta, client.UnsafeDisableDeepCopy) {
		meta.SetGroupVersionKind(obj.GroupVersionKind()) // the cache's object may not carry it
		live = metadataObject(meta)
		v, needsContent := drift.UnchangedMetadata(fields, live.Object, FieldOwner, digest)
		if !needsContent && (!v.Unchanged || !probes.NeedsContent(live, cos.Spec.ProgressionProbes)) {
			return live, v, false, nil
		}
		whole := &unstructured.Unstructured{}
		whole.SetGroupVersionKind(obj.GroupVersionKind())
		if r.getCached(ctx, obj, whole) && whole.GetResourceVersion() == meta.ResourceVersion {
			whole.SetManagedFields(meta.ManagedFields)
			return whole, unchanged(fields, whole, digest), false, nil
		}
	}
	if live, err = r.readLive(ctx, obj); err != nil {
		return nil, drift.Verdict{}, true, err
	}
	return live, unchanged(fields, live, digest), true, nil
}

// getCached reads obj's object from the cache into into; false when the cache does not have it (or
// cannot answer in time).
func (r *ClusterObjectSetReconciler) getCached(ctx context.Context, obj *unstructured.Unstructured, into client.Object, opts ...client.GetOption) bool {
	cctx, cancel := context.WithTimeout(ctx, cacheReadTimeout)
	defer cancel()
	return r.Client.Get(cctx, client.ObjectKeyFromObject(obj), into, opts...) == nil
}

// metadataObject is meta as an unstructured object of its kind holding metadata only, as the
// decisions read it (drift.UnchangedMetadata, collision's metaOf, probes of kinds without content).
// It is built field by field: a restart builds one per managed object, and the generic conversion
// (reflection, and JSON for fieldsV1) cost a large cluster seconds of CPU.
func metadataObject(meta *metav1.PartialObjectMetadata) *unstructured.Unstructured {
	md := map[string]any{"name": meta.Name}
	set := func(k, v string) {
		if v != "" {
			md[k] = v
		}
	}
	set("namespace", meta.Namespace)
	set("uid", string(meta.UID))
	set("resourceVersion", meta.ResourceVersion)
	if meta.Generation != 0 {
		md["generation"] = meta.Generation
	}
	if meta.DeletionTimestamp != nil {
		md["deletionTimestamp"] = meta.DeletionTimestamp.UTC().Format(time.RFC3339)
	}
	stringMap := func(m map[string]string) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	if len(meta.Labels) > 0 {
		md["labels"] = stringMap(meta.Labels)
	}
	if annotations := drift.CachedAnnotations(&meta.ObjectMeta); annotations != nil {
		md["annotations"] = annotations
	}
	if len(meta.Finalizers) > 0 {
		finalizers := make([]any, len(meta.Finalizers))
		for i, f := range meta.Finalizers {
			finalizers[i] = f
		}
		md["finalizers"] = finalizers
	}
	if len(meta.OwnerReferences) > 0 {
		refs := make([]any, len(meta.OwnerReferences))
		for i, r := range meta.OwnerReferences {
			ref := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name, "uid": string(r.UID)}
			if r.Controller != nil {
				ref["controller"] = *r.Controller
			}
			if r.BlockOwnerDeletion != nil {
				ref["blockOwnerDeletion"] = *r.BlockOwnerDeletion
			}
			refs[i] = ref
		}
		md["ownerReferences"] = refs
	}
	if len(meta.ManagedFields) > 0 {
		entries := make([]any, len(meta.ManagedFields))
		for i, e := range meta.ManagedFields {
			entry := map[string]any{"manager": e.Manager, "operation": string(e.Operation), "apiVersion": e.APIVersion}
			if e.Subresource != "" {
				entry["subresource"] = e.Subresource
			}
			if e.FieldsType != "" {
				entry["fieldsType"] = e.FieldsType
			}
			if e.FieldsV1 != nil {
				var fields map[string]any
				if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) == nil {
					entry["fieldsV1"] = fields
				}
			}
			entries[i] = entry
		}
		md["managedFields"] = entries
	}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": md}}
	u.SetGroupVersionKind(meta.GroupVersionKind())
	return u
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
