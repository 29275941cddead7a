package crdcleanup

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The API server's cleanup of a deleted CustomResourceDefinition (its finalizer
// customresourcecleanup.apiextensions.k8s.io) can stall: when listing the custom resources fails,
// typically with "storage is (re)initializing" right after the CRD or a sibling of its group was
// created or deleted, the API server records the reason InstanceDeletionFailed and retries at once.
// If that retry reads the CRD from a cache that has not seen its own status write yet, it gets a
// conflict, drops the item and waits for the next change to the CRD; but it ignores changes to the
// Terminating condition alone, so nothing comes until its informer resyncs, up to 5 minutes later. A
// deleted ClusterObjectSet waits on that CRD all that time. Any other change to the CRD re-triggers
// the cleanup at once: the reconciler writes Annotation on a CRD it deleted whose listing failed, at
// most MaxRetriggers times, Interval after its deletion and then twice as long after each re-trigger,
// up to MaxInterval.
//
// Other failures are not re-triggered: InstanceDeletionCheck (custom resources still held by their
// finalizers after a minute) and a failed delete of the custom resources are retried by the API
// server with backoff, and a re-trigger would only restart its delete-all.
const (
	// Annotation records the last re-trigger: its time (RFC 3339) and number, "<time> #<n>".
	Annotation    = "cos-externalizer.io/cleanup-retriggered-at"
	Interval      = 10 * time.Second
	MaxInterval   = 5 * time.Minute
	MaxRetriggers = 6

	crdGroup         = "apiextensions.k8s.io"
	crdKind          = "CustomResourceDefinition"
	cleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

	// listFailed is the reason, and listFailedMessage the start of the message, of the Terminating
	// condition the API server leaves when listing the custom resources failed.
	listFailed        = "InstanceDeletionFailed"
	listFailedMessage = "could not list instances: "
)

// Retrigger is a re-trigger due.
type Retrigger struct {
	// Reason is the reason of the failure, to report.
	Reason string
	// N is the number of this re-trigger, from 1 to MaxRetriggers.
	N int
	// Annotation is the value of Annotation that records it.
	Annotation string
}

// Stalled reports whether obj is a CustomResourceDefinition being deleted whose cleanup by the API
// server failed to list its custom resources and is due for a re-trigger at now: fewer than
// MaxRetriggers were done, and the interval has passed since the last one (since the deletion for
// the first). An Annotation that does not parse, or older than the deletion (not written for it),
// counts as none.
func Stalled(obj *unstructured.Unstructured, now time.Time) (Retrigger, bool) {
	gvk := obj.GroupVersionKind()
	deleted := obj.GetDeletionTimestamp()
	if gvk.Group != crdGroup || gvk.Kind != crdKind || deleted == nil || !slices.Contains(obj.GetFinalizers(), cleanupFinalizer) {
		return Retrigger{}, false
	}
	reason, failed := listFailure(obj)
	if !failed {
		return Retrigger{}, false
	}
	last, done := deleted.Time, 0
	if at, n, ok := parseAnnotation(obj.GetAnnotations()[Annotation]); ok && !at.Before(deleted.Time) {
		last, done = at, n
	}
	if done >= MaxRetriggers || now.Sub(last) < interval(done) {
		return Retrigger{}, false
	}
	return Retrigger{Reason: reason, N: done + 1, Annotation: annotationValue(now, done+1)}, true
}

// interval is the wait after the deletion (done 0) or after the done-th re-trigger.
func interval(done int) time.Duration {
	d := Interval
	for i := 0; i < done && d < MaxInterval; i++ {
		d *= 2
	}
	return min(d, MaxInterval)
}

func annotationValue(now time.Time, n int) string {
	return fmt.Sprintf("%s #%d", now.UTC().Format(time.RFC3339), n)
}

// parseAnnotation reads a value of Annotation; a time alone (as written before numbers were) is
// re-trigger 1.
func parseAnnotation(v string) (time.Time, int, bool) {
	at, num, numbered := strings.Cut(v, " #")
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return time.Time{}, 0, false
	}
	if !numbered {
		return t, 1, true
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 {
		return time.Time{}, 0, false
	}
	return t, n, true
}

// listFailure returns the reason of a CRD's Terminating condition when it is True with the reason
// and message of a failed listing of the custom resources.
func listFailure(obj *unstructured.Unstructured) (string, bool) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Terminating" {
			continue
		}
		reason, _ := m["reason"].(string)
		message, _ := m["message"].(string)
		return reason, m["status"] == "True" && reason == listFailed && strings.HasPrefix(message, listFailedMessage)
	}
	return "", false
}
