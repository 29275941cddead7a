package controllers

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/drift"
)

// A reconcile skips the server-side apply of an object that would change nothing: a no-op apply of a
// large CustomResourceDefinition costs the API server hundreds of milliseconds, and a restarted
// manager or a new leader would otherwise write every managed object once. The decision is taken from
// the live object alone (drift.Unchanged): it carries the digest of the desired object we applied
// (drift.Annotation, part of what we apply), and our field manager still owns every field of it.
// Drift at any of our fields (a label removed, an annotation or a spec field changed, the digest
// annotation itself) takes the field from us, and the next reconcile applies again.

// reasonAbsent: the object does not exist (a label value of cos_externalizer_applies_total).
const reasonAbsent = "absent"

// unchanged decides whether applying desired (its fields; digest is drift.Digest of it) to live
// would change nothing. live nil: the object does not exist.
func unchanged(desired map[string]any, live *unstructured.Unstructured, digest string) drift.Verdict {
	if live == nil {
		return drift.Verdict{Reason: reasonAbsent}
	}
	return drift.Unchanged(desired, live.Object, FieldOwner, digest)
}
