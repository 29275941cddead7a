package drift

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The manager caches managed objects as metadata, and of their annotations the no-op decision reads
// one value: Annotation's. A map of one entry costs a few hundred bytes an object, the most of what a
// cached object holds, so the cache keeps that value in metadata.selfLink instead (StashDigest), a
// field the API server no longer sets (removed in Kubernetes 1.20) and nothing reads, and the reader
// puts it back where the decision looks for it (CachedAnnotations).

// stashed is where StashDigest keeps the digest in m.
func stashed(m *metav1.ObjectMeta) *string {
	return &m.SelfLink //nolint:staticcheck // deprecated because the API server no longer sets it: free for the cache's copy
}

// StashDigest moves Annotation's value of m into m.SelfLink and drops the annotations: m is the
// cache's copy of a managed object's metadata. Without the annotation, m.SelfLink stays as it is:
// empty as the API server returns an object, the digest when m was stashed before (an informer may
// transform an object twice: its initial list goes through a temporary store first).
func StashDigest(m *metav1.ObjectMeta) {
	if digest, ok := m.Annotations[Annotation]; ok {
		*stashed(m) = digest
	}
	m.Annotations = nil
}

// CachedAnnotations are the annotations of m as the decisions read them, in an unstructured object's
// form: m's own, and Annotation's value if StashDigest kept one in m.SelfLink. m is not changed; nil
// when there are none.
func CachedAnnotations(m *metav1.ObjectMeta) map[string]any {
	digest := *stashed(m)
	if len(m.Annotations) == 0 && digest == "" {
		return nil
	}
	out := make(map[string]any, len(m.Annotations)+1)
	for k, v := range m.Annotations {
		out[k] = v
	}
	if digest != "" {
		out[Annotation] = digest
	}
	return out
}
