package crdcleanup

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// crd builds a CustomResourceDefinition deleted at deleted (nil: not deleted), with the cleanup
// finalizer unless without is set, a Terminating condition of the given status and reason (none
// when reason is empty) and the given annotations.
func crd(deleted *time.Time, status, reason string, annotations map[string]string, without bool) *unstructured.Unstructured {
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
		conds = append(conds, map[string]any{"type": "Terminating", "status": status, "reason": reason,
			"message": "could not list instances: storage is (re)initializing"})
	}
	u.Object["status"] = map[string]any{"conditions": conds}
	return u
}

var created = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func TestStalled(t *testing.T) {
	deleted := created
	failed := "InstanceDeletionFailed"
	at := func(d time.Duration) map[string]string {
		return map[string]string{Annotation: AnnotationValue(created.Add(d))}
	}
	configMap := crd(&deleted, "True", failed, nil, false)
	configMap.SetAPIVersion("v1")
	configMap.SetKind("ConfigMap")
	tests := map[string]struct {
		obj        *unstructured.Unstructured
		after      time.Duration
		want       bool
		wantReason string
	}{
		"failed, deleted 10 s ago":             {obj: crd(&deleted, "True", failed, nil, false), after: 10 * time.Second, want: true, wantReason: failed},
		"failed, deleted 9 s ago: still fresh": {obj: crd(&deleted, "True", failed, nil, false), after: 9 * time.Second, wantReason: failed},
		"the one-minute check timed out":       {obj: crd(&deleted, "True", "InstanceDeletionCheck", nil, false), after: time.Minute, want: true, wantReason: "InstanceDeletionCheck"},
		"re-triggered 5 s ago":                 {obj: crd(&deleted, "True", failed, at(55*time.Second), false), after: time.Minute, wantReason: failed},
		"re-triggered 10 s ago":                {obj: crd(&deleted, "True", failed, at(50*time.Second), false), after: time.Minute, want: true, wantReason: failed},
		"an annotation that does not parse":    {obj: crd(&deleted, "True", failed, map[string]string{Annotation: "soon"}, false), after: time.Minute, want: true, wantReason: failed},
		"in progress: the API server is on it": {obj: crd(&deleted, "True", "InstanceDeletionInProgress", nil, false), after: time.Hour},
		"completed, finalizer about to go":     {obj: crd(&deleted, "False", "InstanceDeletionCompleted", nil, false), after: time.Hour},
		"no Terminating condition yet":         {obj: crd(&deleted, "", "", nil, false), after: time.Hour},
		"not deleted":                          {obj: crd(nil, "True", failed, nil, false), after: time.Hour},
		"cleanup finalizer gone":               {obj: crd(&deleted, "True", failed, nil, true), after: time.Hour},
		"not a CustomResourceDefinition":       {obj: configMap, after: time.Hour},
		"a CRD deleted in the future (skewed)": {obj: crd(&deleted, "True", failed, nil, false), after: -time.Minute, wantReason: failed},
		"re-triggered at a time in the future": {obj: crd(&deleted, "True", failed, at(time.Hour), false), after: time.Minute, wantReason: failed},
		"a failure reason with status False":   {obj: crd(&deleted, "False", failed, nil, false), after: time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reason, got := Stalled(tc.obj, created.Add(tc.after))
			if got != tc.want || reason != tc.wantReason {
				t.Errorf("Stalled = %q, %v; want %q, %v", reason, got, tc.wantReason, tc.want)
			}
		})
	}
}
