package content

import "time"

// LastUsedAnnotation is set on an existing object-data Secret, to the RFC 3339 time (with
// nanoseconds) of the admission request, whenever an admission reuses or references it for a
// ClusterObjectSet being created. Writing it is what matters (it changes the Secret's
// resourceVersion, which the orphan sweep's conditional delete serializes with); the time itself is
// informational, read on the clock the manager gives both the writer and the sweep
// (objectdata.Writer.Clock), which measures grace periods from the write it sees.
const LastUsedAnnotation = "cos-externalizer.io/last-used"

// LastUsedValue is the LastUsedAnnotation value for t.
func LastUsedValue(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// LastUsed returns the time LastUsedAnnotation holds in annotations, and false when it holds none
// that parses.
func LastUsed(annotations map[string]string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, annotations[LastUsedAnnotation])
	return t, err == nil
}
