package phasedigest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

// PhaseDigest returns the digest of a phase's resolved content exactly as OLM v1's
// operator-controller computes it (computePhaseDigest): "sha256:" and the lower-case hex SHA-256 of
// encoding/json's Marshal of {"name": name, "objects": objects}: map keys sorted, HTML characters
// escaped, numbers as encoding/json prints them. Objects are the resolved objects before any
// mutation of ours (labels, owner references), in phase order, as an inline object or a ref's decoded
// value gives them. Either reconciler can therefore verify status.observedPhases the other wrote.
func Of(name string, objects []map[string]any) (string, error) {
	if objects == nil {
		objects = []map[string]any{} // upstream marshals a non-nil slice: "objects":[]
	}
	data, err := json.Marshal(map[string]any{"name": name, "objects": objects})
	if err != nil {
		return "", fmt.Errorf("marshaling phase %q: %w", name, err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Legacy is the digest releases before 2026-11 wrote: "sha256:" and the hex SHA-256 over
// the canonical JSON (content.Canonical) of each object, length-prefixed, without the phase name.
// It is only ever compared against (and written by tests that play an earlier release).
func Legacy(objects []map[string]any) (string, error) {
	h := sha256.New()
	var n [8]byte
	for _, o := range objects {
		b, err := content.Canonical(o)
		if err != nil {
			return "", err
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// DigestMatches reports whether stored, a digest from status.observedPhases, is the digest of the
// phase's resolved content: in upstream's form (PhaseDigest), or in the form earlier releases of
// this project wrote. Stored digests are accepted as they are and never rewritten: a ClusterObjectSet
// latched by an earlier release keeps its digests, which stay verifiable.
func Matches(stored, name string, objects []map[string]any) (bool, error) {
	d, err := Of(name, objects)
	if err != nil || d == stored {
		return err == nil, err
	}
	legacy, err := Legacy(objects)
	if err != nil {
		return false, err
	}
	return legacy == stored, nil
}
