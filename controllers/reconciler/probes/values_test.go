package probes

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tableCase is an input of a function under test and what it returns.
type tableCase[I, W any] struct {
	in   I
	want W
}

// checkTable runs f, named fn in failures, on the input of each case and compares with its want.
func checkTable[I, W any](t *testing.T, fn string, f func(I) W, cases map[string]tableCase[I, W]) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, f(tc.in)); diff != "" {
				t.Errorf("%s() mismatch (-want +got):\n%s", fn, diff)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	checkTable(t, "normalize", normalize, map[string]tableCase[any, any]{
		"int":                      {in: int(3), want: int64(3)},
		"int8":                     {in: int8(-3), want: int64(-3)},
		"int16":                    {in: int16(3), want: int64(3)},
		"int32":                    {in: int32(3), want: int64(3)},
		"int64":                    {in: int64(3), want: int64(3)},
		"uint":                     {in: uint(3), want: int64(3)},
		"uint8":                    {in: uint8(3), want: int64(3)},
		"uint16":                   {in: uint16(3), want: int64(3)},
		"uint32":                   {in: uint32(3), want: int64(3)},
		"uint64":                   {in: uint64(3), want: int64(3)},
		"uint64 beyond int64":      {in: uint64(math.MaxUint64), want: float64(math.MaxUint64)},
		"integral float64":         {in: float64(3), want: int64(3)},
		"negative zero":            {in: math.Copysign(0, -1), want: int64(0)},
		"integral float32":         {in: float32(4), want: int64(4)},
		"fraction":                 {in: 2.5, want: 2.5},
		"float32 fraction":         {in: float32(0.5), want: 0.5},
		"float at 2^63 is a float": {in: 9223372036854775808.0, want: 9223372036854775808.0},
		"float at -2^63":           {in: -9223372036854775808.0, want: int64(math.MinInt64)},
		"infinity stays a float":   {in: math.Inf(1), want: math.Inf(1)},
		"json number integer":      {in: json.Number("42"), want: int64(42)},
		"json number float":        {in: json.Number("4.5"), want: 4.5},
		"json number integral exp": {in: json.Number("1e3"), want: int64(1000)},
		"json number junk":         {in: json.Number("x"), want: "x"},
		"string":                   {in: "3", want: "3"},
		"bool":                     {in: true, want: true},
		"nil":                      {in: nil, want: nil},
		"nested": {
			in:   map[string]any{"a": []any{float64(1), map[string]any{"b": int32(2), "c": 1.5}}},
			want: map[string]any{"a": []any{int64(1), map[string]any{"b": int64(2), "c": 1.5}}},
		},
	})
}

func TestNormalizeDoesNotModify(t *testing.T) {
	in := map[string]any{"a": []any{float64(1)}, "b": map[string]any{"c": int32(2)}}
	normalize(in)
	want := map[string]any{"a": []any{float64(1)}, "b": map[string]any{"c": int32(2)}}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("normalize() modified its input (-want +got):\n%s", diff)
	}
}

func TestAsInt64(t *testing.T) {
	type out struct {
		N  int64
		OK bool
	}
	checkTable(t, "asInt64", func(v any) out { n, ok := asInt64(v); return out{n, ok} }, map[string]tableCase[any, out]{
		"int64":          {in: int64(7), want: out{7, true}},
		"integral float": {in: 7.0, want: out{7, true}},
		"fraction":       {in: 7.5, want: out{0, false}},
		"string":         {in: "7", want: out{0, false}},
		"map":            {in: map[string]any{"a": int64(1)}, want: out{0, false}},
		"list":           {in: []any{int64(1)}, want: out{0, false}},
		"nil":            {in: nil, want: out{0, false}},
		"huge uint":      {in: uint64(math.MaxUint64), want: out{0, false}},
	})
}

func TestRender(t *testing.T) {
	type out struct {
		S  string
		OK bool
	}
	checkTable(t, "render", func(v any) out { s, ok := render(v); return out{s, ok} }, map[string]tableCase[any, out]{
		"string":          {in: "Bound", want: out{"Bound", true}},
		"empty string":    {in: "", want: out{"", true}},
		"true":            {in: true, want: out{"true", true}},
		"false":           {in: false, want: out{"false", true}},
		"int64":           {in: int64(-12), want: out{"-12", true}},
		"int32":           {in: int32(12), want: out{"12", true}},
		"integral float":  {in: 12.0, want: out{"12", true}},
		"fraction":        {in: 0.25, want: out{"0.25", true}},
		"large float":     {in: 1e21, want: out{"1000000000000000000000", true}},
		"small float":     {in: 1e-7, want: out{"0.0000001", true}},
		"json number":     {in: json.Number("3"), want: out{"3", true}},
		"map":             {in: map[string]any{}, want: out{"", false}},
		"list":            {in: []any{"a"}, want: out{"", false}},
		"nil":             {in: nil, want: out{"", false}},
		"unexpected type": {in: struct{}{}, want: out{"", false}},
	})
}

func TestLookup(t *testing.T) {
	obj := map[string]any{
		"spec": map[string]any{"replicas": int64(2), "null": nil, "list": []any{"a"}, "": map[string]any{"x": "y"}},
		"top":  "v",
	}
	type out struct {
		V     any
		Found bool
	}
	checkTable(t, "lookup", func(path string) out { v, found := lookup(obj, path); return out{v, found} }, map[string]tableCase[string, out]{
		"nested":              {in: "spec.replicas", want: out{int64(2), true}},
		"top level":           {in: "top", want: out{"v", true}},
		"map value":           {in: "spec.list", want: out{[]any{"a"}, true}},
		"missing key":         {in: "spec.absent", want: out{nil, false}},
		"missing parent":      {in: "status.phase", want: out{nil, false}},
		"through a scalar":    {in: "top.x", want: out{nil, false}},
		"through a list":      {in: "spec.list.0", want: out{nil, false}},
		"null":                {in: "spec.null", want: out{nil, false}},
		"empty path":          {in: "", want: out{nil, false}},
		"empty segment (key)": {in: "spec..x", want: out{"y", true}},
	})
}

func TestLocate(t *testing.T) {
	obj := map[string]any{
		"spec": map[string]any{"replicas": int64(2), "null": nil, "list": []any{"a"}, "map": map[string]any{}},
		"top":  "v",
	}
	type out struct {
		V     any
		Where location
	}
	checkTable(t, "locate", func(path string) out { v, where := locate(obj, path); return out{v, where} }, map[string]tableCase[string, out]{
		"found":                   {in: "spec.replicas", want: out{int64(2), found}},
		"found map":               {in: "spec.map", want: out{map[string]any{}, found}},
		"missing key":             {in: "spec.absent", want: out{nil, missing}},
		"missing parent":          {in: "status.phase", want: out{nil, missing}},
		"null":                    {in: "spec.null", want: out{nil, missing}},
		"through null":            {in: "spec.null.x", want: out{nil, missing}},
		"missing in an empty map": {in: "spec.map.x.y", want: out{nil, missing}},
		"through a string":        {in: "top.x", want: out{nil, blocked}},
		"through a number":        {in: "spec.replicas.x.y", want: out{nil, blocked}},
		"through a list":          {in: "spec.list.0", want: out{nil, blocked}},
	})
}
