// Package rollout holds the pure decisions of rolling a ClusterObjectSet out that sit above a single
// object: what the results of applying a phase's objects mean for the phase (Phase), and what the
// success of a revision means for the other revisions of its owner (Archive). The reconciler applies,
// reads and writes; these take plain inputs.
package rollout

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/conditions"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/probes"
)

// Applied is what applying one object of a phase gave.
type Applied struct {
	// Desired is the object as resolved, which messages name.
	Desired *unstructured.Unstructured
	// Live is the object as applied, or as found when nothing needed applying; nil on Err or Collision.
	Live *unstructured.Unstructured
	// Collision says why the object was not applied (collision.Decision.Message); empty: none.
	Collision string
	// Err is an API failure.
	Err error
}

// Verdict is what a phase's results mean.
type Verdict struct {
	// Done: every object applied and ready; the next phase may start.
	Done bool
	// Outcome, when not Done and Err is nil: Retrying on collisions, else RollingOut with the probe
	// message of the first object not ready.
	Outcome conditions.Outcome
	// Err joins every object's API failure, in upstream's words.
	Err error
}

// Phase judges phase index from the results of applying its objects, in spec order, as upstream
// does: every failed object and every collision of the phase is reported, and the first object of
// the phase not ready yet. API failures come first, then collisions, then readiness.
func Phase(index int, results []Applied, custom []olmv1.ProgressionProbe) Verdict {
	var failed []error
	var collisions []string
	waiting := ""
	for _, res := range results {
		switch {
		case res.Err != nil:
			failed = append(failed, fmt.Errorf("reconciling %s: %w", UpstreamRef(res.Desired), res.Err))
		case res.Collision != "":
			collisions = append(collisions, fmt.Sprintf("%s\nAction: \"Collision\"\n%s", probes.Identity(res.Desired.Object), res.Collision))
		case waiting == "":
			if p := probes.Evaluate(res.Live, custom); !p.Ready {
				waiting = p.Message
			}
		}
	}
	switch {
	case len(failed) > 0:
		return Verdict{Err: fmt.Errorf("reconciling object: %w", errors.Join(failed...))}
	case len(collisions) > 0:
		return Verdict{Outcome: conditions.Outcome{Kind: conditions.Retrying,
			Message: fmt.Sprintf("revision object collisions in phase %d\n%s", index, strings.Join(collisions, "\n\n"))}}
	case waiting != "":
		return Verdict{Outcome: conditions.Outcome{Kind: conditions.RollingOut, Message: waiting}}
	}
	return Verdict{Done: true}
}

// UpstreamRef names an object as upstream's reconcile errors do: "<group>/<version>, Kind=<Kind>
// <namespace>/<name>". Status messages in upstream's wording use it (and probes.Identity); the
// reconciler's own messages use its one format, "Kind namespace/name".
func UpstreamRef(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GroupVersionKind(), o.GetNamespace(), o.GetName())
}
