package conditions

import (
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

// summary renders conditions as "Type=Status/Reason: Message" in a fixed order.
func summary(c *olmv1.ClusterObjectSet) []string {
	var out []string
	for _, t := range []string{olmv1.ConditionProgressing, olmv1.ConditionAvailable, olmv1.ConditionSucceeded} {
		if cond := apimeta.FindStatusCondition(c.Status.Conditions, t); cond != nil {
			out = append(out, t+"="+string(cond.Status)+"/"+cond.Reason+": "+cond.Message)
			if cond.ObservedGeneration != 3 {
				out = append(out, t+" has observedGeneration "+string(rune('0'+cond.ObservedGeneration)))
			}
		}
	}
	return out
}

// TestSetConditions pins every condition message; the ones upstream also writes are taken from
// operator-controller's clusterobjectset_controller.go and its e2e suite (revision.feature).
func TestSetConditions(t *testing.T) {
	succeeded := metav1.Condition{Type: olmv1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: olmv1.ReasonSucceeded, Message: "Revision succeeded rolling out.", ObservedGeneration: 3}
	available := metav1.Condition{Type: olmv1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: olmv1.ReasonProbesSucceeded, Message: "Objects are available and pass all probes.", ObservedGeneration: 3}
	const probe = `Object PersistentVolumeClaim.v1 ns/test-pvc: value at key "status.phase" != "Bound"; expected: "Bound"`
	const missing = `resolving ref in phase "p": getting Secret ns/s: secrets "s" not found`
	const mutable = "the following secrets are not immutable (referenced secrets must have immutable set to true): ns/name"
	tests := map[string]struct {
		cos  *olmv1.ClusterObjectSet
		o    Outcome
		now  time.Time
		want []string
	}{
		"rolling out, version annotated": {cos: versioned(cos(0), "1.0.2"), o: Outcome{Message: probe}, now: created,
			want: []string{"Progressing=True/RollingOut: Revision 1.0.2 is rolling out.", "Available=False/ProbeFailure: " + probe}},
		"rolling out, no version (two spaces, as upstream)": {cos: cos(0), o: Outcome{Message: probe}, now: created,
			want: []string{"Progressing=True/RollingOut: Revision is rolling out.", "Available=False/ProbeFailure: " + probe}},
		"rolling out, no probe failing": {cos: cos(0), o: Outcome{}, now: created,
			want: []string{"Progressing=True/RollingOut: Revision is rolling out.", "Available=False/RollingOut: Revision is rolling out."}},
		"retrying, first time: Available not set": {cos: cos(0), o: Outcome{Kind: Retrying, Message: missing}, now: created,
			want: []string{"Progressing=True/Retrying: " + missing}},
		"retrying after Available was set": {cos: cos(0, available), o: Outcome{Kind: Retrying, Message: missing}, now: created,
			want: []string{"Progressing=True/Retrying: " + missing, "Available=Unknown/Reconciling: " + missing}},
		"blocked leaves Available alone": {cos: cos(0, available, succeeded), o: Outcome{Kind: Blocked, Message: mutable}, now: created,
			want: []string{"Progressing=False/Blocked: " + mutable, "Available=True/ProbesSucceeded: Objects are available and pass all probes.", "Succeeded=True/Succeeded: Revision succeeded rolling out."}},
		"complete": {cos: versioned(cos(0), "1.0.0"), o: Outcome{Kind: Complete}, now: created,
			want: []string{"Progressing=True/Succeeded: Revision 1.0.0 has rolled out.", "Available=True/ProbesSucceeded: Objects are available and pass all probes.", "Succeeded=True/Succeeded: Revision succeeded rolling out."}},
		"empty revision": {cos: cos(0), o: Outcome{Kind: Empty}, now: created,
			want: []string{"Progressing=True/RollingOut: " + emptyMsg, "Available=Unknown/Reconciling: " + emptyMsg}},
		"empty revision past its deadline": {cos: cos(10), o: Outcome{Kind: Empty}, now: created.Add(time.Hour),
			want: []string{"Progressing=False/ProgressDeadlineExceeded: Revision has not rolled out for 10 minute(s). Last status: " + emptyMsg, "Available=Unknown/Reconciling: " + emptyMsg}},
		"archived keeps Succeeded": {cos: cos(0, succeeded), o: Outcome{Kind: Archived}, now: created,
			want: []string{"Progressing=False/Archived: revision is archived", "Available=Unknown/Archived: revision is archived", "Succeeded=True/Succeeded: Revision succeeded rolling out."}},
		"Succeeded is never cleared": {cos: cos(0, succeeded), o: Outcome{Message: probe}, now: created,
			want: []string{"Progressing=True/RollingOut: Revision is rolling out.", "Available=False/ProbeFailure: " + probe, "Succeeded=True/Succeeded: Revision succeeded rolling out."}},
		"before the deadline": {cos: cos(10), o: Outcome{Message: probe}, now: created.Add(9 * time.Minute),
			want: []string{"Progressing=True/RollingOut: Revision is rolling out.", "Available=False/ProbeFailure: " + probe}},
		"deadline exceeded (upstream's e2e wording)": {cos: versioned(cos(1), "1.0.2"), o: Outcome{Message: probe}, now: created.Add(time.Minute),
			want: []string{"Progressing=False/ProgressDeadlineExceeded: Revision has not rolled out for 1 minute(s). Last status: Revision 1.0.2 is rolling out.", "Available=False/ProbeFailure: " + probe}},
		"deadline exceeded while retrying": {cos: cos(10, available), o: Outcome{Kind: Retrying, Message: missing}, now: created.Add(time.Hour),
			want: []string{"Progressing=False/ProgressDeadlineExceeded: Revision has not rolled out for 10 minute(s). Last status: " + missing, "Available=Unknown/Reconciling: " + missing}},
		"deadline does not hide Blocked": {cos: cos(10), o: Outcome{Kind: Blocked, Message: mutable}, now: created.Add(time.Hour),
			want: []string{"Progressing=False/Blocked: " + mutable}},
		"deadline after success does not count": {cos: cos(10, succeeded), o: Outcome{Message: probe}, now: created.Add(time.Hour),
			want: []string{"Progressing=True/RollingOut: Revision is rolling out.", "Available=False/ProbeFailure: " + probe, "Succeeded=True/Succeeded: Revision succeeded rolling out."}},
		"recovery after the deadline": {cos: cos(10), o: Outcome{Kind: Complete}, now: created.Add(time.Hour),
			want: []string{"Progressing=True/Succeeded: Revision has rolled out.", "Available=True/ProbesSucceeded: Objects are available and pass all probes.", "Succeeded=True/Succeeded: Revision succeeded rolling out."}},
		"teardown of an archived revision ignores the deadline": {cos: archived(cos(10)), o: Outcome{Kind: Retrying, Message: MessageTeardownInProgress}, now: created.Add(time.Hour),
			want: []string{"Progressing=True/Retrying: removing revision resources that are not owned by another revision"}},
		"teardown in progress": {cos: cos(0, available), o: Outcome{Kind: Retrying, Message: MessageTeardownInProgress}, now: created,
			want: []string{"Progressing=True/Retrying: removing revision resources that are not owned by another revision", "Available=Unknown/Reconciling: removing revision resources that are not owned by another revision"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			Set(tc.cos, tc.o, tc.now)
			if diff := cmp.Diff(tc.want, summary(tc.cos)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

const emptyMsg = "Revision is rolling out. The revision has no phases yet: waiting for spec.phases to be filled."

func archived(c *olmv1.ClusterObjectSet) *olmv1.ClusterObjectSet {
	c.Spec.LifecycleState = olmv1.LifecycleStateArchived
	return c
}

func versioned(c *olmv1.ClusterObjectSet, v string) *olmv1.ClusterObjectSet {
	c.Annotations = map[string]string{olmv1.AnnotationBundleVersion: v}
	return c
}

// TestEachConditionFromObservations: each condition is a function of the observations alone, nil
// when it is left as it is.
func TestEachConditionFromObservations(t *testing.T) {
	now := created.Add(time.Hour)
	obs := func(k Kind, msg string, edit ...func(*Observations)) Observations {
		o := Observations{Generation: 7, Version: "1.2.3", Outcome: Outcome{Kind: k, Message: msg}, Now: now, DeadlineMinutes: 10}
		for _, e := range edit {
			e(&o)
		}
		return o
	}
	passed := func(o *Observations) { o.DeadlinePassed = true }
	succeeded := func(o *Observations) { o.Succeeded = true }
	availableSet := func(o *Observations) { o.AvailableSet = true }
	render := func(c *metav1.Condition) string {
		if c == nil {
			return "unchanged"
		}
		if c.ObservedGeneration != 7 || !c.LastTransitionTime.Time.Equal(now) {
			return "wrong observedGeneration or time"
		}
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}
	tests := map[string]struct {
		obs                               Observations
		progressing, available, succeeded string
	}{
		"rolling out":                   {obs: obs(RollingOut, "probe"), progressing: "True/RollingOut: Revision 1.2.3 is rolling out.", available: "False/ProbeFailure: probe", succeeded: "unchanged"},
		"rolling out, nothing failing":  {obs: obs(RollingOut, ""), progressing: "True/RollingOut: Revision 1.2.3 is rolling out.", available: "False/RollingOut: Revision 1.2.3 is rolling out.", succeeded: "unchanged"},
		"rolling out past the deadline": {obs: obs(RollingOut, "probe", passed), progressing: "False/ProgressDeadlineExceeded: Revision has not rolled out for 10 minute(s). Last status: Revision 1.2.3 is rolling out.", available: "False/ProbeFailure: probe", succeeded: "unchanged"},
		"past the deadline, succeeded":  {obs: obs(RollingOut, "probe", passed, succeeded), progressing: "True/RollingOut: Revision 1.2.3 is rolling out.", available: "False/ProbeFailure: probe", succeeded: "unchanged"},
		"retrying, Available never set": {obs: obs(Retrying, "gone"), progressing: "True/Retrying: gone", available: "unchanged", succeeded: "unchanged"},
		"retrying, Available set":       {obs: obs(Retrying, "gone", availableSet), progressing: "True/Retrying: gone", available: "Unknown/Reconciling: gone", succeeded: "unchanged"},
		"blocked: only Progressing":     {obs: obs(Blocked, "changed", passed, availableSet), progressing: "False/Blocked: changed", available: "unchanged", succeeded: "unchanged"},
		"complete":                      {obs: obs(Complete, "", passed), progressing: "True/Succeeded: Revision 1.2.3 has rolled out.", available: "True/ProbesSucceeded: Objects are available and pass all probes.", succeeded: "True/Succeeded: Revision succeeded rolling out."},
		"archived":                      {obs: obs(Archived, "", succeeded), progressing: "False/Archived: revision is archived", available: "Unknown/Archived: revision is archived", succeeded: "unchanged"},
		"empty":                         {obs: obs(Empty, ""), progressing: "True/RollingOut: " + emptyV, available: "Unknown/Reconciling: " + emptyV, succeeded: "unchanged"},
		"empty past the deadline":       {obs: obs(Empty, "", passed), progressing: "False/ProgressDeadlineExceeded: Revision has not rolled out for 10 minute(s). Last status: " + emptyV, available: "Unknown/Reconciling: " + emptyV, succeeded: "unchanged"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := []string{render(Progressing(tc.obs)), render(Available(tc.obs)), render(Succeeded(tc.obs))}
			if diff := cmp.Diff([]string{tc.progressing, tc.available, tc.succeeded}, got); diff != "" {
				t.Errorf("Progressing, Available, Succeeded (-want +got):\n%s", diff)
			}
		})
	}
}

const emptyV = "Revision 1.2.3 is rolling out. The revision has no phases yet: waiting for spec.phases to be filled."

func TestObserve(t *testing.T) {
	available := metav1.Condition{Type: olmv1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: olmv1.ReasonProbeFailure}
	succeeded := metav1.Condition{Type: olmv1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: olmv1.ReasonSucceeded}
	o := Outcome{Kind: Retrying, Message: "m"}
	tests := map[string]struct {
		cos  *olmv1.ClusterObjectSet
		now  time.Time
		want Observations
	}{
		"no deadline": {cos: versioned(cos(0), "2.0.0"), now: created.Add(time.Hour),
			want: Observations{Generation: 3, Version: "2.0.0", Outcome: o, Now: created.Add(time.Hour)}},
		"before the deadline": {cos: cos(10, available), now: created.Add(9 * time.Minute),
			want: Observations{Generation: 3, Outcome: o, Now: created.Add(9 * time.Minute), DeadlineMinutes: 10, AvailableSet: true}},
		"at the deadline": {cos: cos(10, succeeded), now: created.Add(10 * time.Minute),
			want: Observations{Generation: 3, Outcome: o, Now: created.Add(10 * time.Minute), DeadlineMinutes: 10, DeadlinePassed: true, Succeeded: true}},
		"archived: no deadline": {cos: archived(cos(10)), now: created.Add(time.Hour),
			want: Observations{Generation: 3, Outcome: o, Now: created.Add(time.Hour), DeadlineMinutes: 10}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Observe(tc.cos, o, tc.now)); diff != "" {
				t.Errorf("Observe (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChanged(t *testing.T) {
	progressing := func(reason, msg string) metav1.Condition {
		return metav1.Condition{Type: olmv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
	}
	succeeded := metav1.Condition{Type: olmv1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: olmv1.ReasonSucceeded}
	tests := map[string]struct {
		before []metav1.Condition
		o      Outcome
		want   Change
	}{
		"first block":                          {o: Outcome{Kind: Blocked, Message: "a"}, want: NewBlockedCause},
		"blocked again, same cause":            {before: []metav1.Condition{progressing(olmv1.ReasonBlocked, "a")}, o: Outcome{Kind: Blocked, Message: "a"}},
		"blocked again, another cause":         {before: []metav1.Condition{progressing(olmv1.ReasonBlocked, "a")}, o: Outcome{Kind: Blocked, Message: "b"}, want: NewBlockedCause},
		"retrying after blocked, same message": {before: []metav1.Condition{progressing(olmv1.ReasonBlocked, "a")}, o: Outcome{Kind: Retrying, Message: "a"}, want: NewRetryingCause},
		"retrying again, same cause":           {before: []metav1.Condition{progressing(olmv1.ReasonRetrying, "a")}, o: Outcome{Kind: Retrying, Message: "a"}},
		"first success":                        {before: []metav1.Condition{progressing(olmv1.ReasonRollingOut, "")}, o: Outcome{Kind: Complete}, want: FirstSuccess},
		"complete again":                       {before: []metav1.Condition{succeeded}, o: Outcome{Kind: Complete}},
		"rolling out: nothing to say":          {o: Outcome{Kind: RollingOut, Message: "probe"}},
		"archived":                             {before: []metav1.Condition{progressing(olmv1.ReasonRetrying, MessageTeardownInProgress)}, o: Outcome{Kind: Archived}, want: NewlyArchived},
		"archived again":                       {before: []metav1.Condition{progressing(olmv1.ReasonArchived, MessageArchived)}, o: Outcome{Kind: Archived}},
		"archived, no status yet":              {o: Outcome{Kind: Archived}, want: NewlyArchived},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Changed(tc.before, tc.o); got != tc.want {
				t.Errorf("Changed = %v, want %v", got, tc.want)
			}
		})
	}
}
