package validation

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"unicode/utf8"

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
//
// # Bodies of inline objects
//
// Encoding megabytes of inline objects to JSON and decoding them again would dominate the cost of
// validation, for nothing: no rule looks inside an inline object beyond apiVersion, kind and metadata.
// The other fields of an inline object, its body (spec, data, rules, ...), only count through
//
//   - their names: an inline object is an object of so many fields, empty or not, and
//   - their values, for equality, in the transition rule "phases is immutable" and in ratcheting.
//
// So only the typed fields of the spec and the apiVersion, kind and metadata of each inline object go
// through JSON; the body fields are put back into the result as the caller's Go values, unencoded
// (and never changed). Equality compares them as their JSON forms would compare (jsonEqual), so the
// verdicts are those of encoding everything. This holds when a body is a JSON value (isJSONValue):
// made of what JSON decoding yields, with finite numbers and valid UTF-8 field names, not too deeply
// nested. It then encodes without error and its decoded form differs only in repaired strings and in
// integral numbers, which jsonEqual accounts for. When a body is anything else (a Go type JSON
// decoding never makes, NaN, field names that collide once invalid UTF-8 is repaired, a cycle), the
// whole spec is encoded instead (toWireWhole), which also finds and names what cannot be encoded.

var specPath = field.NewPath("spec")

// maxBodyDepth bounds the nesting of the bodies kept unencoded: far below the nesting the decoder
// refuses (10000), and a cycle always exceeds it.
const maxBodyDepth = 500

// wireFunc turns a spec into its wire form, as toWire and toWireWhole do.
type wireFunc func(spec *olmv1.ClusterObjectSetSpec, strict bool) (map[string]any, field.ErrorList)

// toWire returns the wire form of spec, with the bodies of inline objects unencoded when they are
// JSON values (see above).
func toWire(spec *olmv1.ClusterObjectSetSpec, strict bool) (map[string]any, field.ErrorList) {
	heads, bodies, ok := splitBodies(spec)
	if !ok {
		return toWireWhole(spec, strict)
	}
	out, errs := encode(heads, spec, strict)
	if out == nil {
		return nil, errs
	}
	for _, b := range bodies {
		obj := inlineObject(out, b.phase, b.object)
		if obj == nil {
			return nil, append(errs, field.InternalError(specPath, fmt.Errorf("inline object %d of phase %d not found in the wire form", b.object, b.phase)))
		}
		for k, v := range b.content {
			if !isHeadField(k) {
				obj[k] = v
			}
		}
	}
	return out, errs
}

// toWireWhole returns the wire form of spec, encoding all of it.
func toWireWhole(spec *olmv1.ClusterObjectSetSpec, strict bool) (map[string]any, field.ErrorList) {
	return encode(spec, spec, strict)
}

// encode encodes spec as JSON, decodes it and does the API server's decoding steps. orig is the spec
// as given, which encodingErrors searches for what cannot be encoded.
func encode(spec, orig *olmv1.ClusterObjectSetSpec, strict bool) (map[string]any, field.ErrorList) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, encodingErrors(orig, err)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		return nil, field.ErrorList{field.InternalError(specPath, err)}
	}
	pruneNulls(out, specSchema)
	return out, coerce(specPath, out, specSchema, strict)
}

// body locates an inline object with a body: number object of phase number phase, whose content is
// content.
type body struct {
	phase, object int
	content       map[string]any
}

// headFields are the fields of an inline object that the rules look at.
var headFields = [...]string{"apiVersion", "kind", "metadata"}

// splitBodies returns a copy of spec whose inline objects keep only their head fields, and the bodies
// taken out, or ok=false when a body is not a JSON value. spec is not changed; when no inline object
// has a body, heads is spec itself.
func splitBodies(spec *olmv1.ClusterObjectSetSpec) (heads *olmv1.ClusterObjectSetSpec, bodies []body, ok bool) {
	for i := range spec.Phases {
		for j := range spec.Phases[i].Objects {
			content := spec.Phases[i].Objects[j].Object.Object
			hasBody := false
			for k, v := range content {
				if isHeadField(k) {
					continue
				}
				if !utf8.ValidString(k) || !isJSONValue(v, maxBodyDepth) {
					return nil, nil, false
				}
				hasBody = true
			}
			if hasBody {
				bodies = append(bodies, body{phase: i, object: j, content: content})
			}
		}
	}
	if len(bodies) == 0 {
		return spec, nil, true
	}

	// Copy the phases and the objects lists that hold a body, and replace those objects by their heads.
	heads = new(olmv1.ClusterObjectSetSpec)
	*heads = *spec
	heads.Phases = slices.Clone(spec.Phases)
	copied := make([]bool, len(spec.Phases))
	for _, b := range bodies {
		phase := &heads.Phases[b.phase]
		if !copied[b.phase] {
			phase.Objects = slices.Clone(phase.Objects)
			copied[b.phase] = true
		}
		head := make(map[string]any, len(headFields))
		for _, k := range headFields {
			if v, ok := b.content[k]; ok {
				head[k] = v
			}
		}
		phase.Objects[b.object].Object.Object = head
	}
	return heads, bodies, true
}

func isHeadField(k string) bool { return k == "apiVersion" || k == "kind" || k == "metadata" }

// inlineObject returns the wire form of inline object j of phase i, or nil.
func inlineObject(wire map[string]any, i, j int) map[string]any {
	phases, _ := wire["phases"].([]any)
	if i >= len(phases) {
		return nil
	}
	phase, _ := phases[i].(map[string]any)
	objects, _ := phase["objects"].([]any)
	if j >= len(objects) {
		return nil
	}
	object, _ := objects[j].(map[string]any)
	content, _ := object["object"].(map[string]any)
	return content
}

// isJSONValue reports whether v is made only of what JSON decoding yields (nil, bool, string, int64,
// float64, map[string]any, []any), with finite numbers and field names of valid UTF-8, nested at most
// depth deep.
func isJSONValue(v any, depth int) bool {
	switch x := v.(type) {
	case nil, bool, string, int64:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case map[string]any:
		if depth == 0 {
			return false
		}
		for k, e := range x {
			if !utf8.ValidString(k) || !isJSONValue(e, depth-1) {
				return false
			}
		}
		return true
	case []any:
		if depth == 0 {
			return false
		}
		for _, e := range x {
			if !isJSONValue(e, depth-1) {
				return false
			}
		}
		return true
	}
	return false
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
	return walk(p, v, s, func(p *field.Path, v any, s *schema) field.ErrorList {
		if x, ok := v.(map[string]any); ok && s.Embedded {
			return coerceEmbedded(p, x, strict)
		}
		return nil
	})
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
