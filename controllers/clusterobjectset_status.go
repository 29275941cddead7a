package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/conditions"
)

// Event reasons.
const (
	EventPhaseComplete = "PhaseComplete"
	EventSucceeded     = "Succeeded"
	EventBlocked       = "Blocked"
	EventRetrying      = "Retrying"
	EventArchived      = "Archived"
	EventAdopted       = "Adopted"
	// EventCRDCleanupRetriggered: teardown re-triggered the API server's stalled cleanup of a deleted CRD.
	EventCRDCleanupRetriggered = "CRDCleanupRetriggered"
	// EventSecretRestored: the orphan sweep created a Secret the ClusterObjectSet references again
	// from its quarantine copy.
	EventSecretRestored = "SecretRestored"
)

// statusEvent is an Event setStatus found deserved, recorded once the status that says it is stored.
type statusEvent struct {
	eventType, reason, action, note string
}

// setStatus writes what the rollout found into the status of cos (the digests latched, when each
// phase completed, the conditions: conditions.Set) and returns the Events that change deserves. An
// API failure is Retrying with its message. It returns the outcome reported; the caller patches the
// status once and, only once the patch is stored, records the Events (recordEvents): a reconcile of a
// stale copy (a cache behind the status just written) sees the same transition again, and its patch
// fails on the resourceVersion, so no transition is announced twice.
func (r *ClusterObjectSetReconciler) setStatus(cos *olmv1.ClusterObjectSet, found rolloutFound) (conditions.Outcome, []statusEvent) {
	now := r.Clock.Now()
	outcome := found.outcome
	if found.err != nil {
		outcome = conditions.Outcome{Kind: conditions.Retrying, Message: found.err.Error()}
	}
	outcome.Message = truncate(outcome.Message)
	if found.latched != nil {
		cos.Status.ObservedPhases = found.latched
	}
	var events []statusEvent
	for _, done := range found.completed {
		for i := range cos.Status.ObservedPhases {
			o := &cos.Status.ObservedPhases[i]
			if o.Name == done.name && o.CompletedAt.IsZero() {
				o.CompletedAt = metav1.NewTime(done.at)
				events = append(events, statusEvent{corev1.EventTypeNormal, EventPhaseComplete, "RollOut", fmt.Sprintf("phase %q is rolled out and ready", done.name)})
			}
		}
	}
	switch conditions.Changed(cos.Status.Conditions, outcome) {
	case conditions.NewBlockedCause:
		events = append(events, statusEvent{corev1.EventTypeWarning, EventBlocked, "RollOut", outcome.Message})
	case conditions.NewRetryingCause:
		events = append(events, statusEvent{corev1.EventTypeWarning, EventRetrying, "RollOut", outcome.Message})
	case conditions.FirstSuccess:
		events = append(events, statusEvent{corev1.EventTypeNormal, EventSucceeded, "RollOut", "every phase is rolled out and ready"})
	}
	conditions.Set(cos, outcome, now)
	return outcome, events
}

// recordEvents records the Events of a stored status.
func (r *ClusterObjectSetReconciler) recordEvents(cos *olmv1.ClusterObjectSet, events []statusEvent) {
	for _, e := range events {
		r.Recorder.Eventf(cos, nil, e.eventType, e.reason, e.action, "%s", e.note)
	}
}

// reportTeardown writes the conditions of a teardown's outcome (Retrying while objects are being
// deleted, Archived once done) and patches the status; the first Archived records an Event.
func (r *ClusterObjectSetReconciler) reportTeardown(ctx context.Context, cos *olmv1.ClusterObjectSet, o conditions.Outcome) error {
	before := cos.DeepCopy()
	archived := conditions.Changed(cos.Status.Conditions, o) == conditions.NewlyArchived
	conditions.Set(cos, o, r.Clock.Now())
	if err := r.patchStatus(ctx, before, cos); err != nil {
		return err
	}
	if archived {
		r.Recorder.Eventf(cos, nil, corev1.EventTypeNormal, EventArchived, "Archive", "archived: objects handed over or torn down")
	}
	return nil
}

// patchStatus writes the status once, if it changed, guarded by the resourceVersion of before.
func (r *ClusterObjectSetReconciler) patchStatus(ctx context.Context, before, cos *olmv1.ClusterObjectSet) error {
	if apiequality.Semantic.DeepEqual(before.Status, cos.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, cos, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching the status of %s: %w", describe(cos), err)
	}
	return nil
}
