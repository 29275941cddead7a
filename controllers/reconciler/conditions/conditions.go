// Package conditions computes, as pure functions, the status conditions of a ClusterObjectSet
// (Progressing, Available, Succeeded) from what one reconcile observed (Observations, gathered once),
// one function per condition, with upstream's reasons and messages; and which outcomes deserve an
// Event (Changed). The reconciler calls Set once per reconcile, before its one status patch.
package conditions

import (
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Kind is what one reconcile of an Active or Archived ClusterObjectSet found.
type Kind int

const (
	// RollingOut: phases are being applied or waited on (the zero value).
	RollingOut Kind = iota
	// Archived: the revision is archived and torn down.
	Archived
	// Blocked needs a person (content behind a ref changed, a Secret is not immutable).
	Blocked
	// Retrying may resolve itself (a Secret missing, a collision, an API error, teardown pending).
	Retrying
	// Complete: every phase applied and every object ready.
	Complete
	// Empty: the revision has no phases yet. It is not complete, and never archives a predecessor.
	Empty
)

// Outcome is what one reconcile found, and why. Message is the cause for Blocked and Retrying, and,
// while RollingOut, the probe failure of the first object not ready yet (the Available message,
// probes.Result.Message; empty when none failed); other kinds carry none. Messages are upstream's
// (OLM v1 operator-controller) where upstream reports the same situation, and never hold a value
// read from a Secret or a managed object.
type Outcome struct {
	Kind    Kind
	Message string
}

// Messages that hold no value, exactly as upstream writes them.
const (
	MessageArchived           = "revision is archived"
	MessageProbesSucceeded    = "Objects are available and pass all probes."
	MessageSucceeded          = "Revision succeeded rolling out."
	MessageTeardownInProgress = "removing revision resources that are not owned by another revision"
)

// Deadline returns when the progress deadline of c passes, and whether it has one.
func Deadline(c *olmv1.ClusterObjectSet) (time.Time, bool) {
	// As upstream: an archived or deleted revision has no deadline.
	if c.Spec.ProgressDeadlineMinutes <= 0 || c.Spec.LifecycleState == olmv1.LifecycleStateArchived || !c.DeletionTimestamp.IsZero() {
		return time.Time{}, false
	}
	return c.CreationTimestamp.Add(time.Duration(c.Spec.ProgressDeadlineMinutes) * time.Minute), true
}

// Observations is everything the conditions of a ClusterObjectSet follow from, gathered once per
// reconcile (Observe) before any condition is set. A condition that does not follow rollout progress
// adds what it needs here and a function of its own to Conditions.
type Observations struct {
	// Generation is the spec generation observed (every condition's observedGeneration).
	Generation int64
	// Version is the olm.operatorframework.io/bundle-version annotation, empty when unset.
	Version string
	// Outcome is what the reconcile found.
	Outcome Outcome
	// Now is when it found it.
	Now time.Time
	// DeadlineMinutes is spec.progressDeadlineMinutes; DeadlinePassed: the deadline applies
	// (Deadline) and has passed.
	DeadlineMinutes int32
	DeadlinePassed  bool
	// Succeeded: the Succeeded condition is True already (it is never cleared).
	Succeeded bool
	// AvailableSet: the Available condition has been set before.
	AvailableSet bool
}

// Observe gathers the observations of c for the outcome o at now.
func Observe(c *olmv1.ClusterObjectSet, o Outcome, now time.Time) Observations {
	deadline, ok := Deadline(c)
	return Observations{
		Generation: c.Generation, Version: c.Annotations[olmv1.AnnotationBundleVersion], Outcome: o, Now: now,
		DeadlineMinutes: c.Spec.ProgressDeadlineMinutes, DeadlinePassed: ok && !now.Before(deadline),
		Succeeded:    apimeta.IsStatusConditionTrue(c.Status.Conditions, olmv1.ConditionSucceeded),
		AvailableSet: apimeta.FindStatusCondition(c.Status.Conditions, olmv1.ConditionAvailable) != nil,
	}
}

// Conditions are the functions that set each condition from the observations, in order. Each
// returns the condition to set, or nil to leave it as it is.
var Conditions = []func(Observations) *metav1.Condition{Progressing, Available, Succeeded}

// Set updates the conditions of c for the outcome at now, as upstream's reconciler does (see
// Progressing, Available and Succeeded), with apimeta.SetStatusCondition: a condition's
// lastTransitionTime moves only when its status does.
func Set(c *olmv1.ClusterObjectSet, o Outcome, now time.Time) {
	obs := Observe(c, o, now)
	for _, f := range Conditions {
		if cond := f(obs); cond != nil {
			apimeta.SetStatusCondition(&c.Status.Conditions, *cond)
		}
	}
}

func (obs Observations) condition(t string, s metav1.ConditionStatus, reason, msg string) *metav1.Condition {
	return &metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: obs.Generation, LastTransitionTime: metav1.NewTime(obs.Now)}
}

// rollingOutMessage is upstream's Progressing message while rolling out: "Revision <v> is rolling
// out.", v being the bundle-version annotation, which upstream's ClusterExtension applier always
// sets; without it (a ClusterObjectSet applied by hand), "Revision is rolling out." rather than
// upstream's "Revision  is rolling out." with two spaces. Upstream reads reasons, never messages.
func (obs Observations) rollingOutMessage() string {
	return obs.revisionMessage("is rolling out.")
}

// revisionMessage is "Revision <v> <what>", or "Revision <what>" without a bundle version.
func (obs Observations) revisionMessage(what string) string {
	if obs.Version == "" {
		return "Revision " + what
	}
	return fmt.Sprintf("Revision %s %s", obs.Version, what)
}

func (obs Observations) emptyMessage() string {
	return obs.rollingOutMessage() + " The revision has no phases yet: waiting for spec.phases to be filled."
}

// Progressing says whether the rollout moves:
//   - Archived: False/Archived.
//   - Blocked: False/Blocked with the cause.
//   - Retrying: True/Retrying with the cause.
//   - Complete: True/Succeeded, "Revision <v> has rolled out.".
//   - rolling out: True/RollingOut, "Revision <v> is rolling out."; Empty (ours: upstream would
//     report success) says the revision has no phases yet.
//
// While rolling out or retrying, a passed progress deadline turns it False/ProgressDeadlineExceeded
// ("... Last status: <message>"), unless the revision has succeeded once.
func Progressing(obs Observations) *metav1.Condition {
	var reason, msg string
	switch obs.Outcome.Kind {
	case Archived:
		return obs.condition(olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonArchived, MessageArchived)
	case Blocked:
		return obs.condition(olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonBlocked, obs.Outcome.Message)
	case Complete:
		return obs.condition(olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonSucceeded, obs.revisionMessage("has rolled out."))
	case Retrying:
		reason, msg = olmv1.ReasonRetrying, obs.Outcome.Message
	case Empty:
		reason, msg = olmv1.ReasonRollingOut, obs.emptyMessage()
	default:
		reason, msg = olmv1.ReasonRollingOut, obs.rollingOutMessage()
	}
	if obs.DeadlinePassed && !obs.Succeeded {
		return obs.condition(olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonProgressDeadlineExceeded,
			fmt.Sprintf("Revision has not rolled out for %d minute(s). Last status: %s", obs.DeadlineMinutes, msg))
	}
	return obs.condition(olmv1.ConditionProgressing, metav1.ConditionTrue, reason, msg)
}

// Available says whether the objects pass their probes:
//   - Archived: Unknown/Archived.
//   - Blocked: left as it is.
//   - Retrying: Unknown/Reconciling with the cause, but only once Available has been set.
//   - Complete: True/ProbesSucceeded.
//   - rolling out: False/ProbeFailure naming the object waited on (False/RollingOut when no probe
//     failed); Empty: Unknown/Reconciling.
func Available(obs Observations) *metav1.Condition {
	switch obs.Outcome.Kind {
	case Archived:
		return obs.condition(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonArchived, MessageArchived)
	case Blocked:
		return nil
	case Retrying:
		if !obs.AvailableSet {
			return nil
		}
		return obs.condition(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonReconciling, obs.Outcome.Message)
	case Complete:
		return obs.condition(olmv1.ConditionAvailable, metav1.ConditionTrue, olmv1.ReasonProbesSucceeded, MessageProbesSucceeded)
	case Empty:
		return obs.condition(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonReconciling, obs.emptyMessage())
	}
	if obs.Outcome.Message != "" {
		return obs.condition(olmv1.ConditionAvailable, metav1.ConditionFalse, olmv1.ReasonProbeFailure, obs.Outcome.Message)
	}
	return obs.condition(olmv1.ConditionAvailable, metav1.ConditionFalse, olmv1.ReasonRollingOut, obs.rollingOutMessage())
}

// Succeeded is set True the first time the revision is Complete, and never cleared.
func Succeeded(obs Observations) *metav1.Condition {
	if obs.Outcome.Kind != Complete {
		return nil
	}
	return obs.condition(olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded, MessageSucceeded)
}

// Change is what an outcome changes that deserves an Event.
type Change int

const (
	// NoChange: nothing new.
	NoChange Change = iota
	// NewBlockedCause: Blocked, for another cause than the Progressing condition shows.
	NewBlockedCause
	// NewRetryingCause: Retrying, for another cause than the Progressing condition shows.
	NewRetryingCause
	// FirstSuccess: Complete, and Succeeded was not True yet.
	FirstSuccess
	// NewlyArchived: Archived, and Progressing did not say so yet.
	NewlyArchived
)

// Changed compares an outcome with the conditions before it.
func Changed(before []metav1.Condition, o Outcome) Change {
	prev := apimeta.FindStatusCondition(before, olmv1.ConditionProgressing)
	same := func(reason string) bool { return prev != nil && prev.Reason == reason && prev.Message == o.Message }
	switch {
	case o.Kind == Blocked && !same(olmv1.ReasonBlocked):
		return NewBlockedCause
	case o.Kind == Retrying && !same(olmv1.ReasonRetrying):
		return NewRetryingCause
	case o.Kind == Complete && !apimeta.IsStatusConditionTrue(before, olmv1.ConditionSucceeded):
		return FirstSuccess
	case o.Kind == Archived && (prev == nil || prev.Reason != olmv1.ReasonArchived):
		return NewlyArchived
	}
	return NoChange
}
