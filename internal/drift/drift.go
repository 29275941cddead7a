// Package drift decides whether an object as it lives in the cluster still holds what the reconciler
// applied to it, so that a reconcile can skip a server-side apply that would change nothing and must
// not skip one that restores drift.
//
// The comparison is relative: Fingerprint hashes the values a live object holds at exactly the fields
// the reconciler applies (the desired object's shape), and the reconciler compares the fingerprint of
// the object right after its apply with that of the object it reads later. The API server's own
// normalizations (defaults, quantities, list ordering of its choosing) are in both, so they never
// look like drift; any change by someone else at one of our fields (a label removed, an annotation or
// a spec field changed, an owner reference replaced) changes the fingerprint. Fields we do not apply
// (status, other managers' fields, resourceVersion, managedFields) are outside the shape.
package drift

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"slices"
)

// Fingerprint returns a digest of the values live holds at the fields desired sets. Maps in desired
// are followed key by key; any other value of desired (a scalar, a list, an empty map) stands for the
// whole value at that field in live. A field desired sets and live lacks counts as absent, which
// differs from every value. The top-level status is left out: server-side apply does not write it.
// The digest is deterministic within a build; it is kept in memory only.
func Fingerprint(desired, live map[string]any) ([sha256.Size]byte, error) {
	w := writer{h: sha256.New()}
	if err := w.object(desired, live, true); err != nil {
		return [sha256.Size]byte{}, err
	}
	var sum [sha256.Size]byte
	w.h.Sum(sum[:0])
	return sum, nil
}

// Token bytes of the encoding: every value starts with one, so no two different projections encode
// alike.
const (
	tokMap    = '{'
	tokEnd    = '}'
	tokAbsent = '!'
	tokNull   = 'n'
	tokTrue   = 't'
	tokFalse  = 'f'
	tokString = 's'
	tokInt    = 'i'
	tokFloat  = 'd'
	tokJSON   = 'j'
	tokList   = 'l'
)

type writer struct {
	h   hash.Hash
	buf []byte
}

// object writes the projection of live onto the keys of desired, in sorted key order.
func (w *writer) object(desired, live map[string]any, top bool) error {
	keys := sortedKeys(desired)
	if top {
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == "status" })
	}
	w.token(tokMap)
	for _, k := range keys {
		w.str(k)
		lv, ok := live[k]
		dm, dIsMap := desired[k].(map[string]any)
		lm, lIsMap := lv.(map[string]any)
		switch {
		case !ok:
			w.token(tokAbsent)
		case dIsMap && lIsMap && len(dm) > 0:
			if err := w.object(dm, lm, false); err != nil {
				return fmt.Errorf("%s.%w", k, err)
			}
		default:
			if err := w.value(lv); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	w.token(tokEnd)
	return nil
}

// value writes a whole live value.
func (w *writer) value(v any) error {
	switch v := v.(type) {
	case nil:
		w.token(tokNull)
	case bool:
		if v {
			w.token(tokTrue)
		} else {
			w.token(tokFalse)
		}
	case string:
		w.token(tokString)
		w.str(v)
	case int64:
		w.buf = binary.BigEndian.AppendUint64(append(w.buf[:0], tokInt), uint64(v))
		w.flush()
	case float64:
		w.buf = binary.BigEndian.AppendUint64(append(w.buf[:0], tokFloat), math.Float64bits(v))
		w.flush()
	case []any:
		w.buf = binary.BigEndian.AppendUint64(append(w.buf[:0], tokList), uint64(len(v)))
		w.flush()
		for i, x := range v {
			if err := w.value(x); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case map[string]any:
		keys := sortedKeys(v)
		w.token(tokMap)
		for _, k := range keys {
			w.str(k)
			if err := w.value(v[k]); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		w.token(tokEnd)
	default:
		// The rarer number types: encoding/json gives stable bytes.
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		w.token(tokJSON)
		w.str(string(b))
	}
	return nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (w *writer) token(t byte) {
	w.buf = append(w.buf[:0], t)
	w.flush()
}

// str writes a length-prefixed string.
func (w *writer) str(s string) {
	w.buf = binary.BigEndian.AppendUint64(w.buf[:0], uint64(len(s)))
	w.buf = append(w.buf, s...)
	w.flush()
}

func (w *writer) flush() { w.h.Write(w.buf) }
