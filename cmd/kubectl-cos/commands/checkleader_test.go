package commands

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestLeaderVerdict: a manager leads while the leader Lease has a holder renewed within its
// duration; otherwise check warns that nothing reconciles ClusterObjectSets.
func TestLeaderVerdict(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	lease := func(ns, holder string, ago time.Duration) coordinationv1.Lease {
		l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cos-externalizer.olm.operatorframework.io"},
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15)}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		if ago >= 0 {
			l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-ago)}
		}
		return l
	}
	for name, tc := range map[string]struct {
		leases    []coordinationv1.Lease
		namespace string
		result    string
		want      string
	}{
		"held": {leases: []coordinationv1.Lease{lease("cos-system", "cos-externalizer-7d9f-abcde_1234", 3*time.Second)}, namespace: "cos-system",
			result: resultOK, want: "Manager cos-externalizer-7d9f-abcde leads in namespace cos-system (Lease renewed 3s ago)"},
		"at its duration": {leases: []coordinationv1.Lease{lease("cos-system", "p_1", 15*time.Second)}, result: resultOK, want: "leads"},
		"expired": {leases: []coordinationv1.Lease{lease("cos-system", "p_1", 16*time.Second)}, namespace: "cos-system",
			result: resultWarn, want: "No manager leads in namespace cos-system (Lease cos-system/cos-externalizer.olm.operatorframework.io was last renewed by p_1 16s ago, over its 15s)"},
		"released": {leases: []coordinationv1.Lease{lease("cos-system", "", 40*time.Second)},
			result: resultWarn, want: "No manager leads in any namespace (Lease cos-system/cos-externalizer.olm.operatorframework.io has no holder)"},
		"never renewed": {leases: []coordinationv1.Lease{lease("a", "p_1", -1)}, result: resultWarn, want: "was last renewed by p_1"},
		"none": {namespace: "cos-system", result: resultWarn,
			want: "No leader Lease cos-externalizer.olm.operatorframework.io in namespace cos-system: unless a manager runs without --leader-elect, nothing of cos-externalizer rolls ClusterObjectSets out"},
		"one of two leads": {leases: []coordinationv1.Lease{lease("old", "", 0), lease("cos-system", "p_1", time.Second)}, result: resultOK, want: "Manager p leads in namespace cos-system"},
	} {
		t.Run(name, func(t *testing.T) {
			result, msg := leaderVerdict(tc.leases, tc.namespace, now)
			if result != tc.result || !strings.Contains(msg, tc.want) {
				t.Errorf("leaderVerdict = %s %q, want %s with %q", result, msg, tc.result, tc.want)
			}
			if result == resultWarn && !strings.Contains(msg, "their status (Available, Succeeded) is what the last reconciler wrote") {
				t.Errorf("the warning does not say the status is stale: %q", msg)
			}
		})
	}
}
