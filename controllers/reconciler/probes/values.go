package probes

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// lookup follows a dotted path ("spec.replicas") through nested maps. A path through a non-map, a
// missing key or a null value is not found.
func lookup(obj map[string]any, path string) (any, bool) {
	v, where := locate(obj, path)
	return v, where == found
}

// location is where following a dotted path ends.
type location int

const (
	// found: the path leads to a value that is not null.
	found location = iota
	// missing: a key on the way is absent, or its value is null.
	missing
	// blocked: a step on the way holds a value that is not a map (a string, a number, a list...),
	// so the next key cannot be looked up in it. Upstream's unstructured.NestedFieldCopy reports an
	// error there, where an absent key is merely not found.
	blocked
)

// locate follows a dotted path through nested maps and says where it ended. The value is returned
// only when found.
func locate(obj map[string]any, path string) (any, location) {
	var cur any = obj
	for seg := range strings.SplitSeq(path, ".") {
		if cur == nil {
			return nil, missing
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, blocked
		}
		if cur, ok = m[seg]; !ok {
			return nil, missing
		}
	}
	if cur == nil {
		return nil, missing
	}
	return cur, found
}

// asInt64 returns v as an int64 when it is an integer: any Go integer type that fits, a float with an
// integral value that fits, or a json.Number holding one.
func asInt64(v any) (int64, bool) {
	if !isScalar(v) {
		return 0, false
	}
	switch n := normalize(v).(type) {
	case int64:
		return n, true
	default:
		return 0, false
	}
}

// Bounds of the float64 values that convert to int64 exactly: [-2^63, 2^63).
const (
	minInt64Float = -9223372036854775808.0
	maxInt64Float = 9223372036854775808.0
)

// normalizeFloat returns an integral float that fits as an int64, anything else as float64.
func normalizeFloat(f float64) any {
	if f >= minInt64Float && f < maxInt64Float && f == math.Trunc(f) {
		return int64(f)
	}
	return f
}

// normalize makes numbers comparable: every integer (of any Go type, or a float with an integral value
// that fits) becomes an int64, every other number a float64; json.Numbers are parsed. Maps and slices
// are normalized recursively into new values; the input is never modified.
func normalize(v any) any {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int8:
		return int64(n)
	case int16:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case uint:
		return normalizeUint(uint64(n))
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	case uint64:
		return normalizeUint(n)
	case float32:
		return normalizeFloat(float64(n))
	case float64:
		return normalizeFloat(n)
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i
		}
		if f, err := n.Float64(); err == nil {
			return normalizeFloat(f)
		}
		return string(n)
	case map[string]any:
		out := make(map[string]any, len(n))
		for k, e := range n {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, e := range n {
			out[i] = normalize(e)
		}
		return out
	default:
		return v
	}
}

func normalizeUint(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return float64(u)
}

// render returns a scalar as the string a FieldValue assertion compares: strings as they are, booleans
// as true/false, integers in decimal and other numbers in the shortest 'f' form. Maps, lists and nulls
// do not render.
func render(v any) (string, bool) {
	if !isScalar(v) {
		return "", false
	}
	switch n := normalize(v).(type) {
	case string:
		return n, true
	case bool:
		return strconv.FormatBool(n), true
	case int64:
		return strconv.FormatInt(n, 10), true
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64), true
	default:
		return "", false
	}
}

// isScalar reports whether v is neither a map nor a list (so normalizing it copies nothing).
func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	default:
		return true
	}
}
