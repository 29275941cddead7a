package crdcleanup

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The API server's cleanup of a deleted CustomResourceDefinition (its finalizer
// customresourcecleanup.apiextensions.k8s.io) can stall: when listing the custom resources fails,
// typically with "storage is (re)initializing" right after the CRD or a sibling of its group was
// created or deleted, the API server records the reason InstanceDeletionFailed and retries. If that
// retry reads the CRD from a cache that has not seen its own status write yet, it gets a conflict,
// drops the item and waits for the next change to the CRD; but it ignores changes to the Terminating
// condition alone, so nothing comes until its informer resyncs, minutes later. A deleted ClusterObjectSet
// waits on that CRD all that time. Any other change to the CRD re-triggers the cleanup at once: the
// reconciler writes Annotation on a CRD it deleted whose cleanup failed and has not
// moved for Interval.
const (
	Annotation = "cos-externalizer.io/cleanup-retriggered-at"
	Interval   = 10 * time.Second

	crdGroup         = "apiextensions.k8s.io"
	crdKind          = "CustomResourceDefinition"
	cleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"
)

// crdCleanupFailed are the reasons of the Terminating condition with which the API server's CRD
// cleanup leaves an attempt that failed (and is retried, or, after a lost wake-up, not).
var crdCleanupFailed = map[string]bool{"InstanceDeletionFailed": true, "InstanceDeletionCheck": true}

// Stalled reports whether obj is a CustomResourceDefinition being deleted whose cleanup by
// the API server failed and has not been re-triggered for Interval: neither since
// its deletion nor since the time in its Annotation (ignored when it does not parse).
// It also returns the reason of the failure (empty when the cleanup did not fail), to report.
func Stalled(obj *unstructured.Unstructured, now time.Time) (string, bool) {
	gvk := obj.GroupVersionKind()
	deleted := obj.GetDeletionTimestamp()
	if gvk.Group != crdGroup || gvk.Kind != crdKind || deleted == nil || !slices.Contains(obj.GetFinalizers(), cleanupFinalizer) {
		return "", false
	}
	reason, failed := terminatingFailure(obj)
	if !failed {
		return "", false
	}
	last := deleted.Time
	if s, ok := obj.GetAnnotations()[Annotation]; ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(last) {
			last = t
		}
	}
	return reason, now.Sub(last) >= Interval
}

// AnnotationValue is the value of Annotation written at now.
func AnnotationValue(now time.Time) string { return now.UTC().Format(time.RFC3339) }

// terminatingFailure returns the reason of a CRD's Terminating condition when it is True with a
// reason of a failed cleanup attempt.
func terminatingFailure(obj *unstructured.Unstructured) (string, bool) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Terminating" {
			continue
		}
		reason, _ := m["reason"].(string)
		return reason, m["status"] == "True" && crdCleanupFailed[reason]
	}
	return "", false
}
