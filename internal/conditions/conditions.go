// Package conditions computes, as a pure function, the status conditions of a ClusterObjectSet
// (Progressing, Available, Succeeded) that follow from what one reconcile observed, with upstream's
// reasons and messages. The reconciler calls it once per reconcile, before its one status patch.
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

// RollingOutMessage is upstream's Progressing message while rolling out: "Revision <v> is rolling
// out.", v being the bundle-version annotation (empty when unset, as upstream leaves it).
func RollingOutMessage(c *olmv1.ClusterObjectSet) string {
	return fmt.Sprintf("Revision %s is rolling out.", c.Annotations[olmv1.AnnotationBundleVersion])
}

// RolledOutMessage is upstream's Progressing message once the revision has succeeded.
func RolledOutMessage(c *olmv1.ClusterObjectSet) string {
	return fmt.Sprintf("Revision %s has rolled out.", c.Annotations[olmv1.AnnotationBundleVersion])
}

// Deadline returns when the progress deadline of c passes, and whether it has one.
func Deadline(c *olmv1.ClusterObjectSet) (time.Time, bool) {
	// As upstream: an archived or deleted revision has no deadline.
	if c.Spec.ProgressDeadlineMinutes <= 0 || c.Spec.LifecycleState == olmv1.LifecycleStateArchived || !c.DeletionTimestamp.IsZero() {
		return time.Time{}, false
	}
	return c.CreationTimestamp.Add(time.Duration(c.Spec.ProgressDeadlineMinutes) * time.Minute), true
}

// Set updates the conditions of c for the outcome at now, as upstream's reconciler does:
//   - Archived: Progressing False and Available Unknown, both Archived.
//   - Blocked: Progressing False/Blocked; Available and Succeeded are left as they are.
//   - Retrying: Progressing True/Retrying; Available Unknown/Reconciling with the same message, but
//     only if Available has been set before.
//   - Complete: Progressing True/Succeeded, Available True/ProbesSucceeded, Succeeded True.
//   - rolling out: Progressing True/RollingOut, Available False/ProbeFailure naming the object waited on.
//   - Empty (ours: upstream would report success): rolling out, Available Unknown/Reconciling.
//
// While rolling out or retrying, a passed progress deadline turns Progressing False/
// ProgressDeadlineExceeded ("... Last status: <message>"), unless the revision has succeeded once.
// Succeeded, once True, is never cleared.
func Set(c *olmv1.ClusterObjectSet, o Outcome, now time.Time) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.Generation,
			LastTransitionTime: metav1.NewTime(now),
		})
	}
	progressing := func(reason, msg string) {
		if deadline, ok := Deadline(c); ok && !now.Before(deadline) && !apimeta.IsStatusConditionTrue(c.Status.Conditions, olmv1.ConditionSucceeded) {
			set(olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonProgressDeadlineExceeded,
				fmt.Sprintf("Revision has not rolled out for %d minute(s). Last status: %s", c.Spec.ProgressDeadlineMinutes, msg))
			return
		}
		set(olmv1.ConditionProgressing, metav1.ConditionTrue, reason, msg)
	}
	switch o.Kind {
	case Archived:
		set(olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonArchived, MessageArchived)
		set(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonArchived, MessageArchived)
	case Blocked:
		set(olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonBlocked, o.Message)
	case Retrying:
		progressing(olmv1.ReasonRetrying, o.Message)
		if apimeta.FindStatusCondition(c.Status.Conditions, olmv1.ConditionAvailable) != nil {
			set(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonReconciling, o.Message)
		}
	case Complete:
		set(olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonSucceeded, RolledOutMessage(c))
		set(olmv1.ConditionAvailable, metav1.ConditionTrue, olmv1.ReasonProbesSucceeded, MessageProbesSucceeded)
		set(olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded, MessageSucceeded)
	case Empty:
		msg := RollingOutMessage(c) + " The revision has no phases yet: waiting for spec.phases to be filled."
		progressing(olmv1.ReasonRollingOut, msg)
		set(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonReconciling, msg)
	default:
		progressing(olmv1.ReasonRollingOut, RollingOutMessage(c))
		if o.Message != "" {
			set(olmv1.ConditionAvailable, metav1.ConditionFalse, olmv1.ReasonProbeFailure, o.Message)
		} else {
			set(olmv1.ConditionAvailable, metav1.ConditionFalse, olmv1.ReasonRollingOut, RollingOutMessage(c))
		}
	}
}
