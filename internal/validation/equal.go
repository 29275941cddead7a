package validation

import (
	"math"
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Two notions of equality are at work in the API server, and both are reproduced here.
//
// celEqual is CEL's == on values typed by the schema, as transition rules such as
// `self == oldSelf` see them: list-type=map lists compare by key regardless of order, objects with
// declared properties compare those properties and treat a null as absent, and fields the schema
// does not declare (the inside of an embedded object) compare with semantic deep equality, but only
// when the other side has the field too (equal sizes are required).
//
// unchanged is the ratcheting comparison of an update (schema and CEL errors of an unchanged value
// are not reported): deep equality, except that list-type=map lists correlate items by key.

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
		return apiequality.Semantic.DeepEqual(self, other)
	}
	switch s.Type {
	case "array":
		a, okA := self.([]any)
		b, okB := other.([]any)
		if !okA || !okB || len(a) != len(b) {
			return false
		}
		if s.ListType == "map" && len(s.ListMapKeys) == 1 {
			// Index self by key, the last item of a key winning; look up every item of other.
			key := s.ListMapKeys[0]
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
				if !found || !celEqual(mine, item, s.Items) {
					return false
				}
			}
			return true
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
					if vb, ok := b[k]; ok && !apiequality.Semantic.DeepEqual(va, vb) {
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
				if vb, ok := b[k]; ok && !apiequality.Semantic.DeepEqual(va, vb) {
					return false
				}
			}
		}
		return true
	default:
		return celEqualScalars(self, other)
	}
}

// celEqualScalars is CEL's == on scalars: numbers compare by value across int and double.
func celEqualScalars(a, b any) bool {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return x == y
		case float64:
			return intEqualsDouble(x, y)
		}
		return false
	case float64:
		switch y := b.(type) {
		case float64:
			return x == y
		case int64:
			return intEqualsDouble(y, x)
		}
		return false
	case string, bool:
		return a == b
	}
	return false
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
			return reflect.DeepEqual(n, o)
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
		return reflect.DeepEqual(newV, oldV)
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
