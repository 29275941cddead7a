package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

var created = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func cos(deadline int32, conds ...metav1.Condition) *olmv1.ClusterObjectSet {
	return &olmv1.ClusterObjectSet{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 3, CreationTimestamp: metav1.NewTime(created)},
		Spec:       olmv1.ClusterObjectSetSpec{ProgressDeadlineMinutes: deadline},
		Status:     olmv1.ClusterObjectSetStatus{Conditions: conds},
	}
}

// summary renders conditions as "Type=Status/Reason" in a fixed order.
func summary(c *olmv1.ClusterObjectSet) []string {
	var out []string
	for _, t := range []string{olmv1.ConditionProgressing, olmv1.ConditionAvailable, olmv1.ConditionSucceeded} {
		if cond := apimeta.FindStatusCondition(c.Status.Conditions, t); cond != nil {
			out = append(out, t+"="+string(cond.Status)+"/"+cond.Reason)
			if cond.ObservedGeneration != 3 {
				out = append(out, t+" has observedGeneration "+string(rune('0'+cond.ObservedGeneration)))
			}
		}
	}
	return out
}

func TestSetConditions(t *testing.T) {
	succeeded := metav1.Condition{Type: olmv1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: olmv1.ReasonSucceeded, ObservedGeneration: 3}
	tests := map[string]struct {
		cos  *olmv1.ClusterObjectSet
		o    Outcome
		now  time.Time
		want []string
	}{
		"rolling out": {cos: cos(0), o: Outcome{WaitingOn: "Deployment a/b", Phases: 2}, now: created,
			want: []string{"Progressing=True/RollingOut", "Available=False/ProbeFailure"}},
		"retrying": {cos: cos(0), o: Outcome{Retrying: "Secret s does not exist"}, now: created,
			want: []string{"Progressing=True/Retrying", "Available=Unknown/Reconciling"}},
		"blocked": {cos: cos(0), o: Outcome{Blocked: "digest changed"}, now: created,
			want: []string{"Progressing=False/Blocked", "Available=Unknown/Reconciling"}},
		"complete": {cos: cos(0), o: Outcome{Complete: true}, now: created,
			want: []string{"Progressing=True/Succeeded", "Available=True/ProbesSucceeded", "Succeeded=True/Succeeded"}},
		"empty revision": {cos: cos(0), o: Outcome{Empty: true}, now: created,
			want: []string{"Progressing=True/RollingOut", "Available=Unknown/Reconciling"}},
		"empty revision past its deadline": {cos: cos(10), o: Outcome{Empty: true}, now: created.Add(time.Hour),
			want: []string{"Progressing=False/ProgressDeadlineExceeded", "Available=Unknown/Reconciling"}},
		"archived keeps Succeeded": {cos: cos(0, succeeded), o: Outcome{Archived: true}, now: created,
			want: []string{"Progressing=False/Archived", "Available=Unknown/Archived", "Succeeded=True/Succeeded"}},
		"Succeeded is never cleared": {cos: cos(0, succeeded), o: Outcome{WaitingOn: "x"}, now: created,
			want: []string{"Progressing=True/RollingOut", "Available=False/ProbeFailure", "Succeeded=True/Succeeded"}},
		"before the deadline": {cos: cos(10), o: Outcome{WaitingOn: "x"}, now: created.Add(9 * time.Minute),
			want: []string{"Progressing=True/RollingOut", "Available=False/ProbeFailure"}},
		"deadline exceeded": {cos: cos(10), o: Outcome{WaitingOn: "x"}, now: created.Add(10 * time.Minute),
			want: []string{"Progressing=False/ProgressDeadlineExceeded", "Available=False/ProbeFailure"}},
		"deadline exceeded while retrying": {cos: cos(10), o: Outcome{Retrying: "x"}, now: created.Add(time.Hour),
			want: []string{"Progressing=False/ProgressDeadlineExceeded", "Available=Unknown/Reconciling"}},
		"deadline does not hide Blocked": {cos: cos(10), o: Outcome{Blocked: "x"}, now: created.Add(time.Hour),
			want: []string{"Progressing=False/Blocked", "Available=Unknown/Reconciling"}},
		"deadline after success does not count": {cos: cos(10, succeeded), o: Outcome{WaitingOn: "x"}, now: created.Add(time.Hour),
			want: []string{"Progressing=True/RollingOut", "Available=False/ProbeFailure", "Succeeded=True/Succeeded"}},
		"recovery after the deadline": {cos: cos(10), o: Outcome{Complete: true}, now: created.Add(time.Hour),
			want: []string{"Progressing=True/Succeeded", "Available=True/ProbesSucceeded", "Succeeded=True/Succeeded"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			SetConditions(tc.cos, tc.o, tc.now)
			if diff := cmp.Diff(tc.want, summary(tc.cos)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRollingOutMessage(t *testing.T) {
	c := cos(0)
	SetConditions(c, Outcome{WaitingOn: `phase "deploy": Deployment a/b: condition Available is not True`, RolledOutPhases: 1, Phases: 3}, created)
	msg := apimeta.FindStatusCondition(c.Status.Conditions, olmv1.ConditionProgressing).Message
	if !strings.Contains(msg, "rolled out 1 of 3 phases") || !strings.Contains(msg, "Deployment a/b") {
		t.Errorf("message %q", msg)
	}
}
