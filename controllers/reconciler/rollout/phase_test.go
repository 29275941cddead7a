package rollout

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/conditions"
)

func TestPhase(t *testing.T) {
	obj := func(kind, ns, name string, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name, "namespace": ns}}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	cm := obj("ConfigMap", "ns", "a", nil)
	bound := obj("PersistentVolumeClaim", "ns", "data", map[string]any{"phase": "Bound"})
	pending := obj("PersistentVolumeClaim", "ns", "data", map[string]any{"phase": "Pending"})
	pending2 := obj("PersistentVolumeClaim", "ns", "logs", map[string]any{"phase": "Pending"})
	const waitingMsg = `Object PersistentVolumeClaim.v1 ns/data: value at key "status.phase" != "Bound"; expected: "Bound"`
	const owned = "Prevent: controlled by ClusterObjectSet other"
	tests := map[string]struct {
		results []Applied
		custom  []olmv1.ProgressionProbe
		want    Verdict
		wantErr string
	}{
		"no objects: done":     {want: Verdict{Done: true}},
		"every object ready":   {results: []Applied{{Desired: cm, Live: cm}, {Desired: bound, Live: bound}}, want: Verdict{Done: true}},
		"one not ready: waits": {results: []Applied{{Desired: cm, Live: cm}, {Desired: pending, Live: pending}}, want: Verdict{Outcome: conditions.Outcome{Kind: conditions.RollingOut, Message: waitingMsg}}},
		"the first not ready is named": {results: []Applied{{Desired: pending, Live: pending}, {Desired: pending2, Live: pending2}},
			want: Verdict{Outcome: conditions.Outcome{Kind: conditions.RollingOut, Message: waitingMsg}}},
		"collisions, every one, before readiness": {results: []Applied{{Desired: pending, Live: pending}, {Desired: cm, Collision: owned}, {Desired: pending2, Collision: owned}},
			want: Verdict{Outcome: conditions.Outcome{Kind: conditions.Retrying, Message: "revision object collisions in phase 2\n" +
				"Object ConfigMap.v1 ns/a\nAction: \"Collision\"\n" + owned + "\n\n" +
				"Object PersistentVolumeClaim.v1 ns/logs\nAction: \"Collision\"\n" + owned}}},
		"API failures, every one, before collisions": {results: []Applied{{Desired: cm, Collision: owned}, {Desired: cm, Err: errors.New("conflict")}, {Desired: bound, Err: errors.New("forbidden")}},
			wantErr: "reconciling object: reconciling /v1, Kind=ConfigMap ns/a: conflict\nreconciling /v1, Kind=PersistentVolumeClaim ns/data: forbidden"},
		"custom probes count": {results: []Applied{{Desired: cm, Live: cm}}, custom: []olmv1.ProgressionProbe{{
			Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Kind: "ConfigMap"}},
			Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: "data.ready", Value: "yes"}}},
		}}, want: Verdict{Outcome: conditions.Outcome{Kind: conditions.RollingOut, Message: `Object ConfigMap.v1 ns/a: missing key: "data.ready"`}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Phase(2, tc.results, tc.custom)
			if tc.wantErr != "" {
				if got.Err == nil || got.Err.Error() != tc.wantErr {
					t.Fatalf("Err = %v\nwant  %s", got.Err, tc.wantErr)
				}
				if got.Done || got.Outcome != (conditions.Outcome{}) {
					t.Errorf("a failed phase has a verdict too: %+v", got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPhaseKeepsTheErrors(t *testing.T) {
	sentinel := errors.New("sentinel")
	got := Phase(0, []Applied{{Desired: &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}, Err: sentinel}}, nil)
	if !errors.Is(got.Err, sentinel) {
		t.Errorf("Err = %v does not wrap the object's error", got.Err)
	}
}
