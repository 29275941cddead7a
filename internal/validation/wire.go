package validation

import (
	"encoding/json"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// The API server never sees the Go struct: it sees the JSON a client made of it. toWire rebuilds that
// view, so that omitempty and omitzero decide what is absent, strings carry the replacement character
// where they held invalid UTF-8, and numbers are int64 or float64. It then does what the API server's
// decoder does before any validation:
//
//   - drop null values of fields the schema declares (a nil phase objects list becomes absent), and
//   - coerce embedded resources: apiVersion and kind must be strings, and metadata must decode into an
//     ObjectMeta, which then replaces it (unknown metadata fields and a zero creationTimestamp go).
//
// A failed coercion fails the request with 400 Bad Request before validation; for the new object
// toWire returns it as a field error, for the old object (strict=false) it drops what does not
// decode, as the API server does when it reads a stored object.

var specPath = field.NewPath("spec")

func toWire(spec *olmv1.ClusterObjectSetSpec, strict bool) (map[string]any, field.ErrorList) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, encodingErrors(spec, err)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		return nil, field.ErrorList{field.InternalError(specPath, err)}
	}
	pruneNulls(out, specSchema)
	return out, coerce(specPath, out, specSchema, strict)
}

// encodingErrors names the inline objects that cannot be encoded as JSON (a client could not send
// them either).
func encodingErrors(spec *olmv1.ClusterObjectSetSpec, err error) field.ErrorList {
	var errs field.ErrorList
	for i := range spec.Phases {
		for j := range spec.Phases[i].Objects {
			o := &spec.Phases[i].Objects[j].Object
			if _, e := json.Marshal(o); e != nil {
				p := specPath.Child("phases").Index(i).Child("objects").Index(j).Child("object")
				errs = append(errs, field.Invalid(p, field.OmitValueType{}, "cannot be encoded as JSON: "+e.Error()))
			}
		}
	}
	if len(errs) == 0 {
		errs = append(errs, field.InternalError(specPath, fmt.Errorf("cannot be encoded as JSON: %w", err)))
	}
	return errs
}

// pruneNulls removes null values of the fields s declares (none of them is nullable or defaulted).
func pruneNulls(v any, s *schema) {
	if s == nil {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			ps := propSchema(s, k)
			if ps == nil {
				continue
			}
			if val == nil {
				delete(x, k)
				continue
			}
			pruneNulls(val, ps)
		}
	case []any:
		for _, item := range x {
			pruneNulls(item, s.Items)
		}
	}
}

// coerce checks and normalizes the embedded resources below v.
func coerce(p *field.Path, v any, s *schema, strict bool) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	switch x := v.(type) {
	case map[string]any:
		if s.Embedded {
			errs = append(errs, coerceEmbedded(p, x, strict)...)
		}
		for _, k := range sortedKeys(x) {
			if ps := propSchema(s, k); ps != nil {
				child := p.Child(k)
				if s.AdditionalProperties != nil && s.Properties[k] == nil {
					child = p.Key(k)
				}
				errs = append(errs, coerce(child, x[k], ps, strict)...)
			}
		}
	case []any:
		for i, item := range x {
			errs = append(errs, coerce(p.Index(i), item, s.Items, strict)...)
		}
	}
	return errs
}

func coerceEmbedded(p *field.Path, x map[string]any, strict bool) field.ErrorList {
	var errs field.ErrorList
	for _, k := range []string{"apiVersion", "kind"} {
		v, ok := x[k]
		if _, isString := v.(string); !ok || isString {
			continue
		}
		if strict {
			errs = append(errs, field.Invalid(p.Child(k), v, "must be a string"))
		} else {
			delete(x, k)
		}
	}
	raw, ok := x["metadata"]
	if !ok {
		return errs
	}
	meta, err := decodeObjectMeta(raw, strict)
	if err != nil {
		if strict {
			errs = append(errs, field.Invalid(p.Child("metadata"), raw, err.Error()))
		}
		return errs
	}
	normalized, err := runtime.DefaultUnstructuredConverter.ToUnstructured(meta)
	if err != nil {
		if strict {
			errs = append(errs, field.Invalid(p.Child("metadata"), raw, err.Error()))
		}
		return errs
	}
	if meta.CreationTimestamp.IsZero() {
		delete(normalized, "creationTimestamp")
	}
	x["metadata"] = normalized
	return errs
}

// decodeObjectMeta decodes embedded metadata the way the API server does. When not strict, fields
// that do not decode are dropped one by one.
func decodeObjectMeta(raw any, strict bool) (*metav1.ObjectMeta, error) {
	data, err := utiljson.Marshal(raw)
	if err != nil {
		return nil, err
	}
	meta := &metav1.ObjectMeta{}
	err = utiljson.Unmarshal(data, meta)
	if err == nil || strict {
		return meta, err
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("invalid metadata: expected object, got %T", raw)
	}
	meta = &metav1.ObjectMeta{}
	for _, k := range sortedKeys(m) {
		one, err := utiljson.Marshal(map[string]any{k: m[k]})
		if err != nil {
			continue
		}
		if utiljson.Unmarshal(one, &metav1.ObjectMeta{}) == nil {
			_ = utiljson.Unmarshal(one, meta)
		}
	}
	return meta, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
