package admission

import (
	"strconv"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// StaleUpdate reports whether an update is one the API server answers 409 Conflict whatever
// admission answers: the resourceVersion it carries (newRaw's metadata.resourceVersion) is set and is
// not that of the stored object it is compared with (oldRaw's). The API server runs mutating admission
// before its optimistic-concurrency check (the registry's Update builds the object through the
// admission transformers, then compares the object's resourceVersion with the stored one's, and only
// then validates and calls validating admission), so a mutating webhook sees a stale update judged
// against a stored object it was not written against. Judged, it would refuse what the API server
// answers with a Conflict, which every client retries (lifecycle and other transition rules, immutable
// fields, Secrets or owners that moved on), or write Secrets for an update that is never stored. Such
// an update is admitted as it is, with nothing written, and the API server answers its own Conflict.
//
// It compares the resourceVersions as the API server's storage parses them (decimal uint64, so
// "0123" is 123): 0, unset or unparsable in newRaw is not stale here (the API server refuses such an
// update as Invalid after admission, not as a Conflict), and neither is anything it cannot read,
// so that a request is never admitted unjudged unless the API server certainly answers Conflict. A
// Patch or server-side Apply is applied to the stored object and so carries its resourceVersion,
// unless the patch or apply configuration sets one. Keys are matched case-sensitively, as the API
// server's decoder matches them; only the two resourceVersions are decoded.
func StaleUpdate(op Operation, oldRaw, newRaw []byte) bool {
	if op != Update {
		return false
	}
	sent, ok := resourceVersionOf(newRaw)
	if !ok || sent == 0 {
		return false
	}
	// A stored object without a resourceVersion is none: the API server creates (server-side apply),
	// and compares nothing.
	stored, ok := resourceVersionOf(oldRaw)
	return ok && stored != 0 && stored != sent
}

// resourceVersionOf returns metadata.resourceVersion of a JSON object as the API server's storage
// parses it (storage.APIObjectVersioner: unset is 0); not ok when it cannot be read.
func resourceVersionOf(raw []byte) (uint64, bool) {
	var obj struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return 0, false
	}
	if obj.Metadata.ResourceVersion == "" {
		return 0, true
	}
	rv, err := strconv.ParseUint(obj.Metadata.ResourceVersion, 10, 64)
	return rv, err == nil
}
