package content

import "time"

// LastUsedAnnotation is what earlier releases set on an existing object-data Secret, to the RFC 3339
// time of each admission request that reused or referenced it. Nothing writes it any more (issue 35:
// a write per request was unbounded work for any caller of the webhook port) and nothing decides by
// it; kubectl cos inspect still shows it on Secrets that carry it.
const LastUsedAnnotation = "cos-externalizer.io/last-used"

// LastUsedValue is the LastUsedAnnotation value for t.
func LastUsedValue(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// LastUsed returns the time LastUsedAnnotation holds in annotations, and false when it holds none
// that parses.
func LastUsed(annotations map[string]string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, annotations[LastUsedAnnotation])
	return t, err == nil
}
