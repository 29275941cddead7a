package drift

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// obj decodes a JSON object the way the API machinery does for unstructured objects (integers as
// int64, other numbers as float64).
func obj(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(stringsReader(s))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return normalize(m).(map[string]any)
}

// normalize turns json.Number into int64 when integral, else float64, recursively.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = normalize(x)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = normalize(x)
		}
		return v
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

// fieldsOf is the fieldsV1 the API server records for an apply of desired when every map is
// granular and every list atomic (what it records for an object of a schemaless kind), without
// the fields it strips.
func fieldsOf(desired map[string]any) map[string]any {
	return fieldsOfMap(desired, 0)
}

func fieldsOfMap(m map[string]any, depth int) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if (depth == 0 && strippedTop[k]) || (depth == 1 && strippedMetadata[k]) {
			continue
		}
		next := -1
		if depth == 0 && k == "metadata" {
			next = 1
		}
		if c, ok := v.(map[string]any); ok && len(c) > 0 {
			if f := fieldsOfMap(c, next); len(f) > 0 {
				out["f:"+k] = f
			}
			continue
		}
		out["f:"+k] = map[string]any{}
	}
	return out
}

// withFields is desired as the API server returns it after our apply: desired with an Apply entry of
// ours holding fields.
func withFields(desired, fields map[string]any) map[string]any {
	live := deepCopy(desired).(map[string]any)
	md, _ := live["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		live["metadata"] = md
	}
	apiVersion, _ := desired["apiVersion"].(string)
	md["managedFields"] = []any{map[string]any{
		"manager": fieldManager, "operation": "Apply", "apiVersion": apiVersion, "fieldsType": "FieldsV1", "fieldsV1": fields,
	}}
	return live
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}
