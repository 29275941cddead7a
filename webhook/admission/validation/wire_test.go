package validation

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
)

// wireOf is what the API server decodes from the JSON encoding of v.
func wireOf(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %#v: %v", v, err)
	}
	var out any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	return out
}

// TestJSONEqual compares jsonEqual with deep equality of the encoded and decoded values, on every
// pair of a set of values that JSON changes or confuses.
func TestJSONEqual(t *testing.T) {
	values := []any{
		nil, map[string]any(nil), []any(nil), map[string]any{}, []any{}, true, false,
		"", "a", "a\xff", "a\xfe", "a\uFFFD", "a\xff\xfe", "a\uFFFD\uFFFD", "\xe2\x82", "\uFFFD\uFFFD",
		"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD", "<&>",
		int64(0), float64(0), math.Copysign(0, -1), int64(1), float64(1), 1.5, -1.5, int64(-1), float64(-1),
		int64(1<<53 + 1), float64(1<<53 + 2), int64(1<<53 + 2),
		float64(1 << 62), int64(1 << 62), int64(4611686018427388000),
		float64(math.MaxInt64), int64(math.MaxInt64), float64(math.MinInt64), int64(math.MinInt64),
		1e20, int64(1e18), float64(1e18), 1e21, 1e-7, -1e-7, 1e-6, math.SmallestNonzeroFloat64, math.MaxFloat64,
		map[string]any{"a": int64(1)}, map[string]any{"a": float64(1)}, map[string]any{"a": 1.5},
		map[string]any{"a": "x\xff"}, map[string]any{"a": "x\uFFFD"}, map[string]any{"a": nil},
		map[string]any{"b": nil}, map[string]any{"a": map[string]any(nil)}, map[string]any{"a": map[string]any{}},
		map[string]any{"a": int64(1), "b": nil}, map[string]any{"a": []any{int64(1), "\xff"}},
		[]any{int64(1)}, []any{1.0}, []any{1.5}, []any{nil}, []any{[]any(nil)}, []any{[]any{}},
		[]any{int64(1), int64(2)}, []any{int64(2), int64(1)}, []any{map[string]any{"a": "\xff"}},
	}
	for i, a := range values {
		for j, b := range values {
			want := apiequality.Semantic.DeepEqual(wireOf(t, a), wireOf(t, b))
			if got := jsonEqual(a, b); got != want {
				t.Errorf("jsonEqual(%#v, %#v) [%d, %d] = %t, want %t", a, b, i, j, got, want)
			}
		}
	}
}

// agree checks that validating with the bodies of inline objects unencoded (toWire) gives exactly
// the errors, in the same order, of encoding everything (toWireWhole), and returns them.
func agree(t *testing.T, old, obj *olmv1.ClusterObjectSet) []string {
	t.Helper()
	var got, want []string
	if old == nil {
		got, want = rendered(validateCreate(obj, toWire, specSchema)), rendered(validateCreate(obj, toWireWhole, specSchema))
	} else {
		got, want = rendered(validateUpdate(old, obj, toWire, specSchema)), rendered(validateUpdate(old, obj, toWireWhole, specSchema))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("whole encoding (-) and unencoded bodies (+) disagree:\n%s", diff)
	}
	return got
}

// TestWireFormsAgree runs agree on the corpus, the edge cases and the decode errors.
func TestWireFormsAgree(t *testing.T) {
	all := map[string]corpus.Case{}
	for name, tc := range corpus.Cases() {
		all["corpus: "+name] = tc
	}
	for name, tc := range edgeCases() {
		all["edge: "+name] = tc
	}
	for name, tc := range all {
		t.Run(name, func(t *testing.T) {
			agree(t, tc.Old, tc.New)
			agree(t, nil, tc.New)
			if tc.Old != nil {
				agree(t, tc.New, tc.Old)
			}
		})
	}
}

// withBody is a ConfigMap inline object whose fields other than apiVersion, kind and metadata are
// body.
func withBody(body map[string]any) *olmv1.ClusterObjectSet {
	o := b.ConfigMap("default", "c", nil).Object
	for k, v := range body {
		o[k] = v
	}
	return cos(b.WithPhase("deploy", olmv1.ClusterObjectSetObject{Object: unstructured.Unstructured{Object: o}}, cm("other")))
}

// TestBodies covers what JSON changes in bodies, and bodies that cannot be left unencoded.
func TestBodies(t *testing.T) {
	immutable := "FieldValueInvalid spec.phases: Invalid value: " + corpus.MsgPhasesImmutable
	deep := map[string]any{}
	for range maxBodyDepth + 10 {
		deep = map[string]any{"d": deep}
	}
	type tcase struct {
		old, new map[string]any
		// changed: the update breaks "phases is immutable"; whole: a body is not a JSON value, and
		// the whole spec is encoded.
		changed, whole bool
	}
	cases := map[string]tcase{
		"an int and the same number as a float":              {old: map[string]any{"data": map[string]any{"n": int64(1)}}, new: map[string]any{"data": map[string]any{"n": float64(1)}}},
		"an int and a near float that encodes like it":       {old: map[string]any{"n": int64(4611686018427388000)}, new: map[string]any{"n": float64(1 << 62)}},
		"an int and a float of its value, not encoded alike": {old: map[string]any{"n": int64(1 << 62)}, new: map[string]any{"n": float64(1 << 62)}, changed: true},
		"0 and -0":                                  {old: map[string]any{"n": float64(0)}, new: map[string]any{"n": math.Copysign(0, -1)}},
		"a float changes":                           {old: map[string]any{"n": 1.5}, new: map[string]any{"n": 1.25}, changed: true},
		"invalid UTF-8 repaired alike":              {old: map[string]any{"s": "a\xff"}, new: map[string]any{"s": "a\xfe"}},
		"invalid UTF-8 and U+FFFD":                  {old: map[string]any{"s": []any{"a\xff"}}, new: map[string]any{"s": []any{"a\uFFFD"}}},
		"two invalid bytes, one U+FFFD":             {old: map[string]any{"s": "a\xff\xfe"}, new: map[string]any{"s": "a\uFFFD"}, changed: true},
		"null and a nil map":                        {old: map[string]any{"spec": nil}, new: map[string]any{"spec": map[string]any(nil)}},
		"null and an empty map":                     {old: map[string]any{"spec": nil}, new: map[string]any{"spec": map[string]any{}}, changed: true},
		"a null field and no field":                 {old: map[string]any{"spec": nil}, new: map[string]any{}, changed: true},
		"a body and none":                           {old: map[string]any{"data": map[string]any{}}, new: nil, changed: true},
		"a field renamed":                           {old: map[string]any{"data": map[string]any{"k": "v"}}, new: map[string]any{"binaryData": map[string]any{"k": "v"}}},
		"a deep change":                             {old: map[string]any{"spec": map[string]any{"a": []any{map[string]any{"b": "c"}}}}, new: map[string]any{"spec": map[string]any{"a": []any{map[string]any{"b": "d"}}}}, changed: true},
		"a Go int":                                  {old: map[string]any{"n": int64(1)}, new: map[string]any{"n": 1}, whole: true},
		"a Go int that changes":                     {old: map[string]any{"n": int64(1)}, new: map[string]any{"n": 2}, whole: true, changed: true},
		"a map[string]string":                       {old: map[string]any{"data": map[string]any{"k": "v"}}, new: map[string]any{"data": map[string]string{"k": "v"}}, whole: true},
		"field names that collide":                  {old: map[string]any{"a\uFFFD": int64(1)}, new: map[string]any{"a\xff": int64(1), "a\xfe": int64(2)}, whole: true},
		"field names that collide, the other value": {old: map[string]any{"a\uFFFD": int64(2)}, new: map[string]any{"a\xff": int64(1), "a\xfe": int64(2)}, whole: true, changed: true},
		"nested field names that collide":           {old: map[string]any{"d": map[string]any{"a\uFFFD": int64(1)}}, new: map[string]any{"d": map[string]any{"a\xff": int64(1), "a\xfe": int64(2)}}, whole: true},
		"deep nesting":                              {old: map[string]any{"d": deep}, new: map[string]any{"d": deep}, whole: true},
		"NaN":                                       {old: map[string]any{"n": 1.5}, new: map[string]any{"n": math.NaN()}, whole: true},
		"infinity in the old object":                {old: map[string]any{"n": math.Inf(1)}, new: map[string]any{"n": 1.5}, whole: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, obj := withBody(tc.old), withBody(tc.new)
			_, _, fast := splitBodies(&obj.Spec)
			_, _, oldFast := splitBodies(&old.Spec)
			if whole := !fast || !oldFast; whole != tc.whole {
				t.Errorf("whole encoding: %t, want %t", whole, tc.whole)
			}
			agree(t, nil, obj)
			got := agree(t, old, obj)
			if name == "NaN" {
				if len(got) != 1 || got[0] != "FieldValueInvalid spec.phases[0].objects[0].object: Invalid value: cannot be encoded as JSON: json: error calling MarshalJSON for type *unstructured.Unstructured: json: unsupported value: NaN" {
					t.Errorf("got %q", got)
				}
				return
			}
			if changed := cmp.Equal(got, []string{immutable}); changed != tc.changed || !changed && len(got) > 0 {
				t.Errorf("got %q, want phases immutable: %t", got, tc.changed)
			}
			agree(t, obj, old)
		})
	}
}

// TestCycle: a body that holds itself cannot be encoded; nothing loops forever.
func TestCycle(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	obj := withBody(map[string]any{"spec": cyclic})
	if _, _, fast := splitBodies(&obj.Spec); fast {
		t.Error("a cyclic body is left unencoded")
	}
	got := agree(t, nil, obj)
	if len(got) != 1 || got[0] != "FieldValueInvalid spec.phases[0].objects[0].object: Invalid value: cannot be encoded as JSON: json: error calling MarshalJSON for type *unstructured.Unstructured: json: unsupported value: encountered a cycle via map[string]interface {}" {
		t.Errorf("got %q", got)
	}
	// An old object that cannot be encoded has no old value: the transition rules do not run.
	if got := agree(t, obj, withBody(nil)); len(got) != 0 {
		t.Errorf("got %q", got)
	}
}

// fixtures are the excerpts of the real bundles kept in the repository (builders.Excerpt), each as
// one inline ClusterObjectSet: the package's tests need no downloaded bundle. BenchmarkValidate runs
// the full bundles.
func fixtures(t testing.TB) map[string]*olmv1.ClusterObjectSet {
	t.Helper()
	out := map[string]*olmv1.ClusterObjectSet{}
	for _, f := range []struct{ bundle, namespace string }{{"argocd-install", "argocd"}, {"prometheus-operator-crds", "monitoring"}} {
		obj, err := b.Excerpt("x", f.bundle, f.namespace)
		if err != nil {
			t.Fatal(err)
		}
		if len(obj.Spec.Phases) == 0 {
			t.Fatalf("the excerpt of %s holds no objects", f.bundle)
		}
		out[f.bundle] = obj
	}
	return out
}

// TestFastPathTaken: the inline objects of real manifests are left unencoded, and they validate.
func TestFastPathTaken(t *testing.T) {
	for name, obj := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			if _, bodies, ok := splitBodies(&obj.Spec); !ok || len(bodies) == 0 {
				t.Errorf("%d bodies unencoded, fast path %t", len(bodies), ok)
			}
			archived := obj.DeepCopy()
			archived.Spec.LifecycleState = olmv1.LifecycleStateArchived
			agree(t, nil, obj)
			if got := agree(t, obj, archived); len(got) != 0 {
				t.Errorf("archiving is refused: %q", got)
			}
		})
	}
}
