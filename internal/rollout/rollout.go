// Package rollout holds the reconciler's bookkeeping as pure functions: the digest of a phase's
// resolved content, and the status conditions that follow from what a reconcile observed.
package rollout

import (
	"strconv"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Outcome is what one reconcile of an Active or Archived ClusterObjectSet found. At most one of
// Blocked, Retrying and WaitingOn is set; Complete means every phase is applied and ready.
type Outcome struct {
	Archived bool
	// Blocked needs a person (content behind a ref changed, a Secret is not immutable).
	Blocked string
	// Retrying may resolve itself (a Secret missing, a collision, an API error).
	Retrying string
	// WaitingOn names the object whose probes do not pass yet.
	WaitingOn string
	// Complete: every phase applied and every object ready.
	Complete bool
	// Empty: the revision has no phases yet. It is not complete, and never archives a predecessor.
	Empty bool
	// RolledOutPhases is the number of phases complete, for messages.
	RolledOutPhases, Phases int
}

// Deadline returns when the progress deadline of c passes, and whether it has one.
func Deadline(c *olmv1.ClusterObjectSet) (time.Time, bool) {
	if c.Spec.ProgressDeadlineMinutes <= 0 {
		return time.Time{}, false
	}
	return c.CreationTimestamp.Add(time.Duration(c.Spec.ProgressDeadlineMinutes) * time.Minute), true
}

// SetConditions updates the conditions of c for the outcome at now. Succeeded, once True, is never
// cleared; the progress deadline turns Progressing False unless the rollout has succeeded once.
func SetConditions(c *olmv1.ClusterObjectSet, o Outcome, now time.Time) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.Generation,
			LastTransitionTime: metav1.NewTime(now),
		})
	}
	switch {
	case o.Archived:
		set(olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonArchived, "the revision is archived")
		set(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonArchived, "the revision is archived; its objects were handed over or torn down")
		return
	case o.Blocked != "":
		set(olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonBlocked, o.Blocked)
		set(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonReconciling, "probes not observed: the rollout is blocked")
	case o.Retrying != "":
		set(olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonRetrying, o.Retrying)
		set(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonReconciling, "probes not observed: "+o.Retrying)
	case o.Complete:
		set(olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonSucceeded, "every phase is rolled out")
		set(olmv1.ConditionAvailable, metav1.ConditionTrue, olmv1.ReasonProbesSucceeded, "every object passes its probes")
		set(olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded, "the revision rolled out completely")
	case o.Empty:
		// An empty revision is not complete: its phases may still be filled (once).
		set(olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonRollingOut, "the revision has no phases yet: waiting for spec.phases to be filled")
		set(olmv1.ConditionAvailable, metav1.ConditionUnknown, olmv1.ReasonReconciling, "the revision has no objects yet")
	default:
		set(olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonRollingOut, rolloutMessage(o))
		set(olmv1.ConditionAvailable, metav1.ConditionFalse, olmv1.ReasonProbeFailure, o.WaitingOn)
	}
	if o.Blocked == "" && !o.Complete && !apimeta.IsStatusConditionTrue(c.Status.Conditions, olmv1.ConditionSucceeded) {
		if deadline, ok := Deadline(c); ok && !now.Before(deadline) {
			set(olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonProgressDeadlineExceeded,
				"the rollout did not succeed within "+(time.Duration(c.Spec.ProgressDeadlineMinutes)*time.Minute).String()+" of creation; still trying")
		}
	}
}

func rolloutMessage(o Outcome) string {
	msg := "rolling out"
	if o.Phases > 0 {
		msg = "rolled out " + strconv.Itoa(o.RolledOutPhases) + " of " + strconv.Itoa(o.Phases) + " phases"
	}
	if o.WaitingOn != "" {
		msg += "; waiting for " + o.WaitingOn
	}
	return msg
}
