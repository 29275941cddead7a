package crdcleanup

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	testingclock "k8s.io/utils/clock/testing"
)

const listMessage = "could not list instances: storage is (re)initializing"

// crd builds a CustomResourceDefinition deleted at deleted (nil: not deleted), with the cleanup
// finalizer unless without is set, a Terminating condition of the given status, reason and message
// (none when reason is empty) and the given annotations.
func crd(deleted *time.Time, status, reason, message string, annotations map[string]string, without bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName("widgets.example.com")
	if deleted != nil {
		u.SetDeletionTimestamp(&metav1.Time{Time: *deleted})
	}
	if !without {
		u.SetFinalizers([]string{"customresourcecleanup.apiextensions.k8s.io"})
	}
	u.SetAnnotations(annotations)
	conds := []any{map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}}
	if reason != "" {
		conds = append(conds, map[string]any{"type": "Terminating", "status": status, "reason": reason, "message": message})
	}
	u.Object["status"] = map[string]any{"conditions": conds}
	return u
}

var created = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func TestStalled(t *testing.T) {
	deleted := created
	failed := "InstanceDeletionFailed"
	stalled := func(annotations map[string]string) *unstructured.Unstructured {
		return crd(&deleted, "True", failed, listMessage, annotations, false)
	}
	at := func(d time.Duration, n string) map[string]string {
		v := created.Add(d).UTC().Format(time.RFC3339)
		if n != "" {
			v += " #" + n
		}
		return map[string]string{Annotation: v}
	}
	configMap := stalled(nil)
	configMap.SetAPIVersion("v1")
	configMap.SetKind("ConfigMap")
	tests := map[string]struct {
		obj   *unstructured.Unstructured
		after time.Duration
		// want is the re-trigger due; nil: none.
		want *Retrigger
	}{
		"listing failed, deleted 10 s ago": {obj: stalled(nil), after: 10 * time.Second,
			want: &Retrigger{Reason: failed, N: 1, Annotation: "2026-11-22T00:00:10Z #1"}},
		"listing failed, deleted 9 s ago: still fresh": {obj: stalled(nil), after: 9 * time.Second},
		"no custom resource client yet": {obj: crd(&deleted, "True", failed, "could not list instances: unable to find a custom resource client for widgets.example.com: not ready", nil, false),
			after: 10 * time.Second, want: &Retrigger{Reason: failed, N: 1, Annotation: "2026-11-22T00:00:10Z #1"}},
		"re-trigger 1, 19 s ago: the second waits 20 s": {obj: stalled(at(41*time.Second, "1")), after: time.Minute},
		"re-trigger 1, 20 s ago": {obj: stalled(at(40*time.Second, "1")), after: time.Minute,
			want: &Retrigger{Reason: failed, N: 2, Annotation: "2026-11-22T00:01:00Z #2"}},
		"re-trigger 3, 79 s ago: the fourth waits 80 s": {obj: stalled(at(time.Minute, "3")), after: time.Minute + 79*time.Second},
		"re-trigger 3, 80 s ago": {obj: stalled(at(time.Minute, "3")), after: time.Minute + 80*time.Second,
			want: &Retrigger{Reason: failed, N: 4, Annotation: "2026-11-22T00:02:20Z #4"}},
		"re-trigger 5, 299 s ago: the interval is capped at 5 minutes": {obj: stalled(at(time.Minute, "5")), after: time.Minute + 299*time.Second},
		"re-trigger 5, 5 minutes ago": {obj: stalled(at(time.Minute, "5")), after: 6 * time.Minute,
			want: &Retrigger{Reason: failed, N: 6, Annotation: "2026-11-22T00:06:00Z #6"}},
		"re-trigger 6, the last": {obj: stalled(at(time.Minute, "6")), after: 24 * time.Hour},
		"re-trigger 60":          {obj: stalled(at(time.Minute, "60")), after: 24 * time.Hour},
		"an annotation without a number (an older release's) is re-trigger 1": {obj: stalled(at(40*time.Second, "")), after: time.Minute,
			want: &Retrigger{Reason: failed, N: 2, Annotation: "2026-11-22T00:01:00Z #2"}},
		"an annotation that does not parse counts as none": {obj: stalled(map[string]string{Annotation: "soon"}), after: time.Minute,
			want: &Retrigger{Reason: failed, N: 1, Annotation: "2026-11-22T00:01:00Z #1"}},
		"a number that does not parse counts as none": {obj: stalled(map[string]string{Annotation: "2026-11-22T00:00:50Z #x"}), after: time.Minute,
			want: &Retrigger{Reason: failed, N: 1, Annotation: "2026-11-22T00:01:00Z #1"}},
		"a number below 1 counts as none": {obj: stalled(at(50*time.Second, "0")), after: time.Minute,
			want: &Retrigger{Reason: failed, N: 1, Annotation: "2026-11-22T00:01:00Z #1"}},
		"an annotation older than the deletion counts as none": {obj: stalled(at(-time.Hour, "6")), after: time.Minute,
			want: &Retrigger{Reason: failed, N: 1, Annotation: "2026-11-22T00:01:00Z #1"}},
		"re-triggered at a time in the future": {obj: stalled(at(time.Hour, "1")), after: time.Minute},
		"a CRD deleted in the future (skewed)": {obj: stalled(nil), after: -time.Minute},
		"custom resources held by finalizers: the API server retries": {obj: crd(&deleted, "True", "InstanceDeletionCheck",
			"could not confirm zero CustomResources remaining: context deadline exceeded", nil, false), after: time.Hour},
		"deletes of custom resources failed: the API server retries": {obj: crd(&deleted, "True", failed,
			"could not issue all deletes: admission webhook denied the request", nil, false), after: time.Hour},
		"in progress: the API server is on it": {obj: crd(&deleted, "True", "InstanceDeletionInProgress", "CustomResource deletion is in progress", nil, false), after: time.Hour},
		"completed, finalizer about to go":     {obj: crd(&deleted, "False", "InstanceDeletionCompleted", "removed all instances", nil, false), after: time.Hour},
		"no Terminating condition yet":         {obj: crd(&deleted, "", "", "", nil, false), after: time.Hour},
		"not deleted":                          {obj: crd(nil, "True", failed, listMessage, nil, false), after: time.Hour},
		"cleanup finalizer gone":               {obj: crd(&deleted, "True", failed, listMessage, nil, true), after: time.Hour},
		"not a CustomResourceDefinition":       {obj: configMap, after: time.Hour},
		"a failure reason with status False":   {obj: crd(&deleted, "False", failed, listMessage, nil, false), after: time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := Stalled(tc.obj, created.Add(tc.after))
			var gotP *Retrigger
			if ok {
				gotP = &got
			} else if got != (Retrigger{}) {
				t.Errorf("no re-trigger due, but %+v", got)
			}
			if diff := cmp.Diff(tc.want, gotP); diff != "" {
				t.Errorf("Stalled (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetriggerSchedule runs a reconciler's teardown polls (every 2 s, as teardownPoll) on a CRD
// whose cleanup stays stalled, writing Annotation at each re-trigger due, and records when they
// happen after the deletion, with their numbers: 10 s after the deletion, then 20, 40, 80, 160 and
// 300 s apart, and no more.
func TestRetriggerSchedule(t *testing.T) {
	deleted := created
	tests := map[string]struct {
		reason, message string
		// annotation is on the CRD before the first poll.
		annotation string
		want       []string
	}{
		"listing failed": {reason: "InstanceDeletionFailed", message: listMessage,
			want: []string{"10s #1", "30s #2", "1m10s #3", "2m30s #4", "5m10s #5", "10m10s #6"}},
		"listing failed, re-triggered 4 times by a previous leader": {reason: "InstanceDeletionFailed", message: listMessage,
			annotation: "2026-11-22T00:02:30Z #4", want: []string{"5m10s #5", "10m10s #6"}},
		"custom resources held by finalizers": {reason: "InstanceDeletionCheck", message: "could not confirm zero CustomResources remaining: timed out"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var annotations map[string]string
			if tc.annotation != "" {
				annotations = map[string]string{Annotation: tc.annotation}
			}
			obj := crd(&deleted, "True", tc.reason, tc.message, annotations, false)
			clock := testingclock.NewFakePassiveClock(created)
			var got []string
			for clock.Now().Before(created.Add(time.Hour)) {
				if r, ok := Stalled(obj, clock.Now()); ok {
					got = append(got, fmt.Sprintf("%s #%d", clock.Since(created), r.N))
					obj.SetAnnotations(map[string]string{Annotation: r.Annotation})
				}
				clock.SetTime(clock.Now().Add(2 * time.Second))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("re-triggers after the deletion (-want +got):\n%s", diff)
			}
		})
	}
}
