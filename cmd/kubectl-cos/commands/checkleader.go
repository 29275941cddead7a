package commands

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// reconciler says whether a manager leads, and so rolls ClusterObjectSets out: the holder of the
// leader Lease in the manager's namespace (found through the webhooks' Service), or in any namespace
// when that is not known. A ClusterObjectSet does not say whether anything reconciles it: its status
// is what the last reconciler wrote. Nothing in webhook-only mode (OLM rolls out).
func (c *checker) reconciler(ctx context.Context, cl *clients) {
	if c.mode.Rollout == "false" {
		return
	}
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + olmv1.LeaderElectionLease}
	list, err := cl.kube.CoordinationV1().Leases(c.namespace).List(ctx, opts)
	if err != nil {
		c.warn("reconciler", "Cannot read the leader Lease %s (%s): whether a manager rolls ClusterObjectSets out is not checked.", olmv1.LeaderElectionLease, reason(err))
		return
	}
	result, msg := leaderVerdict(list.Items, c.namespace, time.Now())
	c.add("reconciler", result, "%s", msg)
}

// leaderVerdict judges the leader Leases found (in namespace, or in every namespace when it is
// empty) at now: ok when one is held and renewed within its duration, else a warning that nothing of
// cos-externalizer reconciles ClusterObjectSets, and how to tell.
func leaderVerdict(leases []coordinationv1.Lease, namespace string, now time.Time) (string, string) {
	where := "in any namespace"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	const stale = "nothing of cos-externalizer rolls ClusterObjectSets out, repairs their objects or tears them down, and their status (Available, Succeeded) is what the last reconciler wrote"
	if len(leases) == 0 {
		return resultWarn, fmt.Sprintf("No leader Lease %s %s: unless a manager runs without --leader-elect, %s.", olmv1.LeaderElectionLease, where, stale)
	}
	var notes []string
	for _, l := range leases {
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		duration := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 15)) * time.Second
		var renewed time.Time
		if l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.Time
		}
		switch {
		case holder == "":
			notes = append(notes, fmt.Sprintf("Lease %s/%s has no holder", l.Namespace, l.Name))
		case renewed.IsZero() || now.Sub(renewed) > duration:
			notes = append(notes, fmt.Sprintf("Lease %s/%s was last renewed by %s %s ago, over its %s", l.Namespace, l.Name, holder, now.Sub(renewed).Round(time.Second), duration))
		default:
			pod, _, _ := strings.Cut(holder, "_")
			return resultOK, fmt.Sprintf("Manager %s leads in namespace %s (Lease renewed %s ago): it rolls ClusterObjectSets out.", pod, l.Namespace, now.Sub(renewed).Round(time.Second))
		}
	}
	return resultWarn, fmt.Sprintf("No manager leads %s (%s): %s.", where, strings.Join(notes, "; "), stale)
}
