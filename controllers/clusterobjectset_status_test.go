package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/conditions"
)

// TestSetStatus: what one rollout pass found becomes the status (digests latched, phase completion
// times, conditions) and the Events it deserves, at the injected clock's time; the Events are
// recorded only when the caller says the status is stored (recordEvents). The API server's side
// (the one status patch) is the integration tests'.
func TestSetStatus(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	seen := now.Add(-2 * time.Second) // when the rollout saw a phase complete, before the status is written
	done := func(names ...string) []completedPhase {
		var out []completedPhase
		for _, n := range names {
			out = append(out, completedPhase{name: n, at: seen})
		}
		return out
	}
	latched := []olmv1.ObservedPhase{{Name: "crds", Digest: "sha256:aa"}, {Name: "deploy", Digest: "sha256:bb"}}
	progressing := func(reason, msg string) metav1.Condition {
		return metav1.Condition{Type: olmv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: 1, LastTransitionTime: earlier}
	}
	succeeded := metav1.Condition{Type: olmv1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: olmv1.ReasonSucceeded, Message: conditions.MessageSucceeded, ObservedGeneration: 1, LastTransitionTime: earlier}
	tests := map[string]struct {
		observed   []olmv1.ObservedPhase
		conditions []metav1.Condition
		found      rolloutFound
		wantPhases []olmv1.ObservedPhase
		wantReason string // of Progressing
		wantMsg    string
		wantEvents []string
	}{
		"first pass latches, completes the first phase": {
			found:      rolloutFound{outcome: conditions.Outcome{Kind: conditions.RollingOut, Message: "probe"}, latched: latched, completed: done("crds")},
			wantPhases: []olmv1.ObservedPhase{{Name: "crds", Digest: "sha256:aa", CompletedAt: metav1.NewTime(seen)}, {Name: "deploy", Digest: "sha256:bb"}},
			wantReason: olmv1.ReasonRollingOut, wantMsg: "Revision is rolling out.",
			wantEvents: []string{`Normal PhaseComplete phase "crds" is rolled out and ready`},
		},
		"a phase completed before keeps its time and says nothing": {
			observed:   []olmv1.ObservedPhase{{Name: "crds", Digest: "sha256:aa", CompletedAt: earlier}, {Name: "deploy", Digest: "sha256:bb"}},
			conditions: []metav1.Condition{progressing(olmv1.ReasonRollingOut, "Revision is rolling out.")},
			found:      rolloutFound{outcome: conditions.Outcome{Kind: conditions.Complete}, completed: done("crds", "deploy")},
			wantPhases: []olmv1.ObservedPhase{{Name: "crds", Digest: "sha256:aa", CompletedAt: earlier}, {Name: "deploy", Digest: "sha256:bb", CompletedAt: metav1.NewTime(seen)}},
			wantReason: olmv1.ReasonSucceeded, wantMsg: "Revision has rolled out.",
			wantEvents: []string{`Normal PhaseComplete phase "deploy" is rolled out and ready`, "Normal Succeeded every phase is rolled out and ready"},
		},
		"complete again: no Event": {
			observed:   []olmv1.ObservedPhase{{Name: "crds", Digest: "sha256:aa", CompletedAt: earlier}},
			conditions: []metav1.Condition{progressing(olmv1.ReasonSucceeded, "Revision has rolled out."), succeeded},
			found:      rolloutFound{outcome: conditions.Outcome{Kind: conditions.Complete}, completed: done("crds")},
			wantPhases: []olmv1.ObservedPhase{{Name: "crds", Digest: "sha256:aa", CompletedAt: earlier}},
			wantReason: olmv1.ReasonSucceeded, wantMsg: "Revision has rolled out.",
		},
		"a new cause of a block is an Event": {
			observed: latched, found: rolloutFound{outcome: conditions.Outcome{Kind: conditions.Blocked, Message: "content changed"}},
			wantPhases: latched, wantReason: olmv1.ReasonBlocked, wantMsg: "content changed",
			wantEvents: []string{"Warning Blocked content changed"},
		},
		"the same block again is not": {
			observed: latched, conditions: []metav1.Condition{progressing(olmv1.ReasonBlocked, "content changed")},
			found:      rolloutFound{outcome: conditions.Outcome{Kind: conditions.Blocked, Message: "content changed"}},
			wantPhases: latched, wantReason: olmv1.ReasonBlocked, wantMsg: "content changed",
		},
		"an API failure is Retrying with its message, latched digests kept": {
			found:      rolloutFound{latched: latched, err: errors.New("reconciling object: forbidden")},
			wantPhases: latched, wantReason: olmv1.ReasonRetrying, wantMsg: "reconciling object: forbidden",
			wantEvents: []string{"Warning Retrying reconciling object: forbidden"},
		},
		"a long message is truncated everywhere": {
			found:      rolloutFound{outcome: conditions.Outcome{Kind: conditions.Retrying, Message: strings.Repeat("x", 2000)}},
			wantReason: olmv1.ReasonRetrying, wantMsg: strings.Repeat("x", maxMessage-3) + "...",
			wantEvents: []string{"Warning Retrying " + strings.Repeat("x", maxMessage-3) + "..."},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			r := &ClusterObjectSetReconciler{Metrics: NewMetrics(), Recorder: rec, Clock: testingclock.NewFakePassiveClock(now)}
			cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1},
				Status: olmv1.ClusterObjectSetStatus{ObservedPhases: tc.observed, Conditions: tc.conditions}}
			_, events := r.setStatus(cos, tc.found)
			if len(rec.Events) > 0 {
				t.Errorf("setStatus recorded %d Events before the status was stored", len(rec.Events))
			}
			r.recordEvents(cos, events)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if diff := cmp.Diff(tc.wantEvents, got); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPhases, cos.Status.ObservedPhases); diff != "" {
				t.Errorf("observedPhases (-want +got):\n%s", diff)
			}
			p := apimeta.FindStatusCondition(cos.Status.Conditions, olmv1.ConditionProgressing)
			if p == nil || p.Reason != tc.wantReason || p.Message != tc.wantMsg || p.ObservedGeneration != 1 {
				t.Errorf("Progressing = %+v, want reason %s, message %q", p, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	tests := map[string]struct {
		kind string
		key  client.ObjectKey
		want string
	}{
		"namespaced":     {kind: "Secret", key: client.ObjectKey{Namespace: "olmv1-system", Name: "s"}, want: "Secret olmv1-system/s"},
		"cluster-scoped": {kind: "ClusterObjectSet", key: client.ObjectKey{Name: "app-1"}, want: "ClusterObjectSet app-1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := describeKey(tc.kind, tc.key); got != tc.want {
				t.Errorf("describeKey = %q, want %q", got, tc.want)
			}
		})
	}
	if got := describe(&olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "app-1"}}); got != "ClusterObjectSet app-1" {
		t.Errorf("describe of a typed ClusterObjectSet without TypeMeta = %q", got)
	}
}
