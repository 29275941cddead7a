// Package recheck decides, as a pure function of what one reconcile found and the clock, when a
// ClusterObjectSet is reconciled again without an event: watches do the real work, these are the
// fallbacks (a rollout waiting on readiness, the progress deadline, the drift check of a rolled-out
// revision, the re-verification of refs to Secrets that are not watched).
package recheck

import (
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/conditions"
)

// Fallback bounds how long a rollout that is waiting (rolling out, retrying) goes without an event.
const Fallback = 2 * time.Minute

// DeadlineMargin is how long after the progress deadline a rollout waiting past it looks again, so
// that the deadline has passed when it does.
const DeadlineMargin = time.Second

// Policy is the manager's configuration.
type Policy struct {
	Clock clock.PassiveClock
	// DriftCheck is how often a rolled-out ClusterObjectSet is reconciled (--drift-check-interval);
	// 0: events only.
	DriftCheck time.Duration
	// ExternalRefCheck is how often a rolled-out or Blocked ClusterObjectSet with refs to Secrets
	// outside the system namespace, which are not watched, re-reads them (--external-ref-check-interval);
	// 0: never.
	ExternalRefCheck time.Duration
	// Jitter spreads a periodic check; nil: wait.Jitter(d*9/10, 0.2), 90% to 108% of d.
	Jitter func(time.Duration) time.Duration
}

// Input is what one reconcile found.
type Input struct {
	// Kind is the reconcile's outcome.
	Kind conditions.Kind
	// Deadline is when the progress deadline passes (conditions.Deadline); zero: none.
	Deadline time.Time
	// RefsOutside: the ClusterObjectSet has refs to Secrets outside the system namespace.
	RefsOutside bool
}

// After is how long until the ClusterObjectSet is reconciled again without an event; 0: only on an
// event.
//   - Complete: every DriftCheck, or ExternalRefCheck if sooner and the refs need it.
//   - Blocked (needs a person) and Empty (waits for a spec change): only ExternalRefCheck, when the
//     refs need it, so that restoring a Secret nobody watches unblocks it.
//   - rolling out or retrying: Fallback, or just past the progress deadline if that comes first.
//   - Archived: never; teardown paces itself.
func (p Policy) After(in Input) time.Duration {
	switch in.Kind {
	case conditions.Complete:
		return p.periodic(in, p.DriftCheck)
	case conditions.Blocked, conditions.Empty:
		return p.periodic(in, 0)
	case conditions.Archived:
		return 0
	}
	after := Fallback
	if !in.Deadline.IsZero() {
		if left := in.Deadline.Sub(p.Clock.Now()); left > 0 && left < after {
			after = left + DeadlineMargin
		}
	}
	return after
}

// periodic spreads the sooner of every and, when the refs need it, ExternalRefCheck (0: never).
func (p Policy) periodic(in Input, every time.Duration) time.Duration {
	if p.ExternalRefCheck > 0 && in.RefsOutside && (every == 0 || p.ExternalRefCheck < every) {
		every = p.ExternalRefCheck
	}
	if every == 0 {
		return 0
	}
	if p.Jitter != nil {
		return p.Jitter(every)
	}
	return wait.Jitter(every*9/10, 0.2)
}
