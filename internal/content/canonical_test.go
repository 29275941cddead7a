package content

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCanonical(t *testing.T) {
	tests := map[string]struct {
		obj  map[string]any
		want string
	}{
		"empty":             {map[string]any{}, `{}`},
		"keys sorted":       {map[string]any{"b": 1, "a": 2, "C": 3, "aa": 4}, `{"C":3,"a":2,"aa":4,"b":1}`},
		"nested sorted":     {map[string]any{"z": map[string]any{"y": true, "x": nil}}, `{"z":{"x":null,"y":true}}`},
		"no html escaping":  {map[string]any{"s": "<a href=\"x\">&</a>"}, `{"s":"<a href=\"x\">&</a>"}`},
		"unicode kept":      {map[string]any{"s": "héllo ☃"}, `{"s":"héllo ☃"}`},
		"control escaped":   {map[string]any{"s": "a\nb\t\x01"}, `{"s":"a\nb\t\u0001"}`},
		"line separators":   {map[string]any{"s": "\u2028\u2029"}, `{"s":"\u2028\u2029"}`},
		"numbers":           {map[string]any{"i": int64(-7), "f": 1.5, "g": float64(3), "big": int64(math.MaxInt64)}, `{"big":9223372036854775807,"f":1.5,"g":3,"i":-7}`},
		"arrays keep order": {map[string]any{"l": []any{"b", "a", map[string]any{"k": "v", "j": []any{}}}}, `{"l":["b","a",{"j":[],"k":"v"}]}`},
		"manifest": {
			object("ConfigMap", "ns", "n"),
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n","namespace":"ns"}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Canonical(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("Canonical (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCanonicalStable builds equal objects with keys inserted in different orders, many times: the
// bytes must not change (Go randomizes map iteration, so this would catch an order leak).
func TestCanonicalStable(t *testing.T) {
	keys := []string{"metadata", "kind", "apiVersion", "spec", "data", "a", "b", "c", "d", "e"}
	build := func(order []string) map[string]any {
		m := map[string]any{}
		for _, k := range order {
			m[k] = map[string]any{k + "2": k, k + "1": []any{k, int64(len(k))}}
		}
		return m
	}
	want := mustCanonical(t, build(keys))
	reversed := make([]string, len(keys))
	for i, k := range keys {
		reversed[len(keys)-1-i] = k
	}
	for i := range 200 {
		order := keys
		if i%2 == 1 {
			order = reversed
		}
		if diff := cmp.Diff(string(want), string(mustCanonical(t, build(order)))); diff != "" {
			t.Fatalf("run %d differs (-want +got):\n%s", i, diff)
		}
	}
}

func TestCanonicalErrors(t *testing.T) {
	tests := map[string]map[string]any{
		"NaN":         {"f": math.NaN()},
		"infinity":    {"f": math.Inf(1)},
		"channel":     {"c": make(chan int)},
		"nested func": {"m": map[string]any{"f": func() {}}},
	}
	for name, obj := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Canonical(obj)
			if err == nil {
				t.Fatalf("Canonical = %q, want an error", got)
			}
			_, stdErr := encodingJSON(obj)
			if diff := cmp.Diff("canonical JSON: "+stdErr.Error(), err.Error()); diff != "" {
				t.Errorf("error is not encoding/json's (-want +got):\n%s", diff)
			}
		})
	}
}

// encodingJSON is the reference for Canonical: encoding/json without HTML escaping or the newline.
func encodingJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// nested returns an object nested depth maps deep (and a slice at every other level).
func nested(depth int) map[string]any {
	obj := map[string]any{"leaf": "x"}
	for i := range depth {
		if i%2 == 0 {
			obj = map[string]any{"m": obj, "n": int64(i)}
		} else {
			obj = map[string]any{"l": []any{obj, float64(i) + 0.5}}
		}
	}
	return obj
}

// TestCanonicalMatchesEncodingJSON checks the values Canonical writes itself, and the ones it leaves
// to encoding/json, against encoding/json's own output.
func TestCanonicalMatchesEncodingJSON(t *testing.T) {
	type named string
	tests := map[string]any{
		"floats": []any{0.0, math.Copysign(0, -1), 1.0, -1.5, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 5e-324, 1e20, 1e21,
			123456789012345680000.0, -1e21, math.MaxFloat64, 0.1, 1.0 / 3, 2.5e-8, 1e-10, 1e100},
		"integers":         []any{int64(0), int64(-1), int64(math.MinInt64), int64(math.MaxInt64), 7, int32(-9)},
		"other numbers":    []any{int8(3), uint64(math.MaxUint64), float32(0.1), float32(1e-7), json.Number("1.50")},
		"strings":          []any{"", "plain", `"quoted" \ back`, "\b\f\n\r\t\x00\x01\x1f\x7f", "<>&", "é☃😀", "\u2028\u2029", "a\xffb", "\xed\xa0\x80", "\xf0\x9f"},
		"keys":             map[string]any{"\u2028": 1, "<k>": 2, "\xff": 3, "Z": 4, "a": 5, "é": 6, "": 7, "a\x00": 8},
		"nil map and list": map[string]any{"m": map[string]any(nil), "l": []any(nil), "e": []any{}, "o": map[string]any{}},
		"typed values": map[string]any{"ss": []string{"<b>", "a"}, "ms": map[string]string{"b": "1", "a": "2"}, "named": named("n&m"),
			"struct": struct {
				A string `json:"a"`
				B int    `json:"b,omitempty"`
			}{A: "x>y"}, "ptr": (*int)(nil), "bytes": []byte("raw")},
		"deep": nested(2 * maxFastDepth),
	}
	for name, v := range tests {
		t.Run(name, func(t *testing.T) {
			obj := map[string]any{"v": v}
			want, err := encodingJSON(obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(mustCanonical(t, obj))); diff != "" {
				t.Errorf("Canonical differs from encoding/json (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCanonicalCycle checks that an object containing itself is an error, not endless recursion.
func TestCanonicalCycle(t *testing.T) {
	m := map[string]any{"a": "b"}
	m["self"] = map[string]any{"m": m}
	l := []any{"x"}
	l[0] = map[string]any{"l": l}
	for name, obj := range map[string]map[string]any{"map": m, "slice": {"l": l}} {
		t.Run(name, func(t *testing.T) {
			if got, err := Canonical(obj); err == nil {
				t.Errorf("Canonical = %d bytes, want an error", len(got))
			}
		})
	}
}

// TestCanonicalErrorKeepsPrefix checks that a failed appendCanonical gives back dst as it was.
func TestCanonicalErrorKeepsPrefix(t *testing.T) {
	dst := []byte("prefix")
	got, err := appendCanonical(dst, map[string]any{"a": "b", "z": math.NaN()})
	if err == nil {
		t.Fatal("no error for NaN")
	}
	if diff := cmp.Diff("prefix", string(got)); diff != "" {
		t.Errorf("dst (-want +got):\n%s", diff)
	}
}

// FuzzCanonicalMatchesEncodingJSON holds Canonical to encoding/json's bytes on objects parsed from
// the fuzzer's JSON (as unstructured objects are parsed, and as encoding/json parses: float64 only)
// and on generated ones.
func FuzzCanonicalMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"<b>&\u2028\ud800"}}`), uint64(1))
	f.Add([]byte(`{"n":1.0,"m":[1,2.5,-3e5,1e-7,1e21,123456789012345678901234567890,null,true,false,{}]}`), uint64(2))
	f.Add([]byte(`{"z":{"b":{"\u0000":"\b\f\n\r\t\u001f\"\\"}},"a":[[],[[]]]}`), uint64(3))
	f.Fuzz(func(t *testing.T, doc []byte, seed uint64) {
		var objs []map[string]any
		if obj, ok := normalized(doc); ok {
			objs = append(objs, obj)
		}
		var std map[string]any
		if json.Unmarshal(doc, &std) == nil && std != nil {
			objs = append(objs, std)
		}
		r := rand.New(rand.NewPCG(seed, seed>>7))
		objs = append(objs, map[string]any{"spec": randomValue(r, r.IntN(4000)+1, 0)})
		for _, obj := range objs {
			want, wantErr := encodingJSON(obj)
			got, err := Canonical(obj)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("Canonical error %v, encoding/json error %v", err, wantErr)
			}
			if !bytes.Equal(want, got) {
				t.Fatalf("Canonical differs from encoding/json:\n%s\n%s", want, got)
			}
		}
	})
}
