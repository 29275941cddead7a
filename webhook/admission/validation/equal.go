package validation

import (
	"encoding/json"
	"math"
	"unicode/utf8"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Two notions of equality are at work in the API server, and both are reproduced here.
//
// celEqual is CEL's == on values typed by the schema, as transition rules such as
// `self == oldSelf` see them: list-type=map lists compare by key regardless of order, objects with
// declared properties compare those properties and treat a null as absent, and fields the schema
// does not declare (the inside of an embedded object) compare with deep equality, but only when the
// other side has the field too (equal sizes are required).
//
// unchanged is the ratcheting comparison of an update (schema and CEL errors of an unchanged value
// are not reported): deep equality, except that list-type=map lists correlate items by key.
//
// Deep equality, in both, is jsonEqual: the API server's semantic deep equality of decoded values,
// which also compares the unencoded bodies of inline objects (see wire.go) as their JSON forms.

// embeddedMetaSchema declares what CEL sees of an embedded resource: apiVersion, kind, and metadata
// with name and generateName.
var embeddedMetaSchema = map[string]*schema{
	"apiVersion": str(),
	"kind":       str(),
	"metadata": {Type: "object", Properties: map[string]*schema{
		"name":         str(),
		"generateName": str(),
	}},
}

// celEqual reports whether CEL finds self == other, both typed by s.
func celEqual(self, other any, s *schema) bool {
	if self == nil || other == nil {
		return self == nil && other == nil
	}
	if s == nil {
		return jsonEqual(self, other)
	}
	switch s.Type {
	case "array":
		a, okA := self.([]any)
		b, okB := other.([]any)
		if !okA || !okB || len(a) != len(b) {
			return false
		}
		if s.ListType == "map" && len(s.ListMapKeys) == 1 {
			return celEqualMapList(a, b, s.ListMapKeys[0], s.Items)
		}
		for i := range a {
			if !celEqual(a[i], b[i], s.Items) {
				return false
			}
		}
		return true
	case "object":
		a, okA := self.(map[string]any)
		b, okB := other.(map[string]any)
		if !okA || !okB || len(a) != len(b) {
			return false
		}
		return celEqualObject(a, b, s)
	default:
		return celEqualScalars(self, other)
	}
}

// celEqualMapList is CEL's == on two list-type=map lists of the same length, keyed by key: by key,
// regardless of order.
func celEqualMapList(a, b []any, key string, items *schema) bool {
	// Index a by key, the last item of a key winning; look up every item of b.
	byKey := make(map[any]any, len(a))
	for _, item := range a {
		if k, ok := scalarKey(item, key); ok {
			byKey[k] = item
		}
	}
	for _, item := range b {
		k, ok := scalarKey(item, key)
		if !ok {
			return false
		}
		mine, found := byKey[k]
		if !found || !celEqual(mine, item, items) {
			return false
		}
	}
	return true
}

// celEqualObject is CEL's == on two objects of the same size typed by s: declared properties
// compared by their schemas (a null as absent), undeclared fields only where b has them too.
func celEqualObject(a, b map[string]any, s *schema) bool {
	props := s.Properties
	if s.Embedded {
		props = embeddedMetaSchema
	}
	for k, va := range a {
		switch {
		case props != nil:
			ps, declared := props[k]
			if !declared {
				// Undeclared field: compared only when the other side has it.
				if vb, ok := b[k]; ok && !jsonEqual(va, vb) {
					return false
				}
				continue
			}
			vb := b[k]
			if (va != nil) != (vb != nil) {
				return false
			}
			if va != nil && !celEqual(va, vb, ps) {
				return false
			}
		case s.AdditionalProperties != nil:
			vb, ok := b[k]
			if !ok || !celEqual(va, vb, s.AdditionalProperties) {
				return false
			}
		default:
			if vb, ok := b[k]; ok && !jsonEqual(va, vb) {
				return false
			}
		}
	}
	return true
}

// celEqualScalars is CEL's == on scalars: numbers compare by value across int and double.
func celEqualScalars(a, b any) bool {
	switch x := a.(type) {
	case int64:
		if y, ok := b.(float64); ok {
			return intEqualsDouble(x, y)
		}
	case float64:
		if y, ok := b.(int64); ok {
			return intEqualsDouble(y, x)
		}
	case string, bool:
	default:
		return false
	}
	// Scalars of different types are unequal; a's type is comparable, so == does not panic.
	return a == b
}

// intEqualsDouble reports whether an int and a double denote the same number.
func intEqualsDouble(i int64, d float64) bool {
	if math.IsNaN(d) || d < math.MinInt64 || d >= -math.MinInt64 {
		return false
	}
	return math.Trunc(d) == d && int64(d) == i
}

// scalarKey returns the value of a list-map item's key field when it is a scalar.
func scalarKey(item any, key string) (any, bool) {
	m, ok := item.(map[string]any)
	if !ok {
		return nil, false
	}
	switch v := m[key].(type) {
	case string, int64, float64, bool:
		return v, true
	}
	return nil, false
}

// unchanged is the API server's ratcheting equality between a new value and its correlated old value.
func unchanged(newV, oldV any, s *schema) bool {
	if newV == nil || oldV == nil {
		return newV == nil && oldV == nil
	}
	switch n := newV.(type) {
	case []any:
		o, ok := oldV.([]any)
		if !ok || len(n) != len(o) {
			return false
		}
		if s == nil || s.ListType != "map" || s.Items == nil || len(s.ListMapKeys) != 1 {
			// Items of other lists do not correlate: the list is compared as a whole.
			return jsonEqual(n, o)
		}
		for _, item := range n {
			old := correlateItem(item, o, s)
			if old == nil || !unchanged(item, old, s.Items) {
				return false
			}
		}
		return true
	case map[string]any:
		o, ok := oldV.(map[string]any)
		if !ok || len(n) != len(o) {
			return false
		}
		for k, v := range n {
			ov, ok := o[k]
			ps := propSchema(s, k)
			if !ok || ps == nil {
				// A field without a schema (the inside of an embedded object) does not correlate, so
				// the object counts as changed.
				return false
			}
			if !unchanged(v, ov, ps) {
				return false
			}
		}
		return true
	default:
		if _, isMap := oldV.(map[string]any); isMap {
			return false
		}
		if _, isList := oldV.([]any); isList {
			return false
		}
		return jsonEqual(newV, oldV)
	}
}

// correlateItem returns the item of the old list-map with the key of item (the first one, if the old
// list repeats a key), or nil.
func correlateItem(item any, old []any, s *schema) any {
	if s == nil || s.ListType != "map" || len(s.ListMapKeys) != 1 {
		return nil
	}
	k, ok := scalarKey(item, s.ListMapKeys[0])
	if !ok {
		return nil
	}
	for _, o := range old {
		if ok2, found := scalarKey(o, s.ListMapKeys[0]); found && ok2 == k {
			return o
		}
	}
	return nil
}

// propSchema returns the schema of property k of an object schema, or nil.
func propSchema(s *schema, k string) *schema {
	if s == nil {
		return nil
	}
	if p, ok := s.Properties[k]; ok {
		return p
	}
	return s.AdditionalProperties
}

// jsonEqual reports whether a and b are equal as the API server sees them: their JSON forms, once
// decoded, are deeply equal. On wire values this is apiequality.Semantic.DeepEqual, which on their
// types is plain deep equality. jsonEqual also takes the unencoded bodies of inline objects, JSON
// values (isJSONValue) whose JSON forms differ from them in two ways only: invalid UTF-8 in a string
// becomes U+FFFD, byte by byte, and a float64 whose encoding is an integer becomes an int64; a nil
// map or list is null. Values of other types do not occur; they compare with
// apiequality.Semantic.DeepEqual.
func jsonEqual(a, b any) bool {
	a, b = nilAsNull(a), nilAsNull(b)
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && (x == y || jsonString(x) == jsonString(y))
	case int64, float64:
		return jsonNumbersEqual(a, b)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, va := range x {
			vb, found := y[k]
			if !found || !jsonEqual(va, vb) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// nilAsNull returns nil for a nil map or list, which encode as null.
func nilAsNull(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return nil
		}
	case []any:
		if x == nil {
			return nil
		}
	}
	return v
}

// jsonString is s as encoding/json encodes it: every byte of s that is not part of valid UTF-8
// becomes U+FFFD.
func jsonString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[:size]...)
		}
		s = s[size:]
	}
	return string(out)
}

// jsonNumbersEqual compares two numbers, each an int64 or a float64, as their JSON forms decode. Two
// float64s are equal exactly when their numeric values are: distinct finite values have distinct
// shortest encodings, and 0 and -0 both decode as the int64 0.
func jsonNumbersEqual(a, b any) bool {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return x == y
		case float64:
			return jsonNumber(y) == a
		}
	case float64:
		switch y := b.(type) {
		case float64:
			return x == y
		case int64:
			return jsonNumber(x) == b
		}
	}
	return false
}

// jsonNumber is what the API server decodes from the JSON encoding of f: an int64 when the encoding
// is an integer that fits, else a float64 (nil for the numbers JSON cannot encode).
func jsonNumber(f float64) any {
	data, err := json.Marshal(f)
	if err != nil {
		return nil
	}
	var v any
	if utiljson.Unmarshal(data, &v) != nil {
		return nil
	}
	return v
}
