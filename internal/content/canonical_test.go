package content

import (
	"math"
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
			if got, err := Canonical(obj); err == nil {
				t.Errorf("Canonical = %q, want an error", got)
			}
		})
	}
}
