package validation

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
)

// TestBoundError classifies the errors the checks of this package raise.
func TestBoundError(t *testing.T) {
	p := field.NewPath("spec", "x")
	schemaErrs := func(v any, s *schema) field.ErrorList {
		ch := &checker{}
		ch.checkSchema(p, v, s, nil)
		return ch.errs
	}
	long := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	embedded := cos(b.WithPhase("a", cmWith(func(o map[string]any) {
		o["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{
			"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "subresource": long + long + long}}
	})))
	tests := map[string]struct {
		errs field.ErrorList
		want []bool
	}{
		"minimum":                               {errs: schemaErrs(int64(1), &schema{Type: "integer", Minimum: i64(10)}), want: []bool{true}},
		"negative minimum":                      {errs: schemaErrs(int64(-9), &schema{Type: "integer", Minimum: i64(-3)}), want: []bool{true}},
		"maximum":                               {errs: schemaErrs(int64(721), &schema{Type: "integer", Maximum: i64(720)}), want: []bool{true}},
		"minItems":                              {errs: schemaErrs([]any{}, &schema{Type: "array", MinItems: i64(1)}), want: []bool{true}},
		"maxItems":                              {errs: schemaErrs([]any{"a", "b"}, &schema{Type: "array", MaxItems: i64(1), Items: str()}), want: []bool{true}},
		"minLength":                             {errs: schemaErrs("", boundedString(1, 3)), want: []bool{true}},
		"maxLength":                             {errs: schemaErrs("abcd", boundedString(1, 3)), want: []bool{true}},
		"maxLength of one":                      {errs: schemaErrs("ab", boundedString(0, 1)), want: []bool{true}},
		"enum":                                  {errs: schemaErrs("Z", enum("A", "B")), want: []bool{false}},
		"required":                              {errs: schemaErrs(map[string]any{}, &schema{Type: "object", Required: []string{"a"}}), want: []bool{false}},
		"a rule":                                {errs: ValidateCreate(cos(b.WithPhase("A_B", cm("x")))), want: []bool{false}},
		"a skipped rule":                        {errs: ValidateCreate(cos(b.WithProgressDeadline(1), b.WithPhase("A_B", cm("x")))), want: []bool{true, false}},
		"a transition rule":                     {errs: ValidateUpdate(cos(b.WithRevision(1)), cos(b.WithRevision(2))), want: []bool{false}},
		"an embedded managedFields subresource": {errs: ValidateCreate(embedded), want: []bool{false, false}},
		"an embedded negative generation (apimachinery's origin minimum)": {errs: ValidateCreate(cos(b.WithPhase("a", cmWith(func(o map[string]any) {
			o["metadata"].(map[string]any)["generation"] = int64(-1)
		})))), want: []bool{false}},
		"a rule whose message looks like a bound": {errs: field.ErrorList{field.Invalid(p, 1, "x in body should be greater than or equal to 10")}, want: []bool{false}},
		"a phase order error": {errs: ValidatePhaseOrder(cos(b.WithPhase("a", cm("x")), b.WithPhase("b", cm("y"))), cos(b.WithPhase("b", cm("y")), b.WithPhase("a", cm("x")))),
			want: []bool{false}},
		"nil": {errs: field.ErrorList{nil}, want: []bool{false}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []bool
			dependent := false
			for _, e := range tc.errs {
				got = append(got, BoundError(e))
				dependent = dependent || BoundError(e)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("BoundError of %v (-want +got):\n%s", tc.errs, diff)
			}
			if BoundDependent(tc.errs) != dependent {
				t.Errorf("BoundDependent = %v, want %v", !dependent, dependent)
			}
		})
	}
	if BoundDependent(nil) {
		t.Error("no errors depend on bounds")
	}
}

// TestBoundErrorsAreTheBounds checks BoundError against the schema over the corpus and the fuzz
// seeds: an error is a bound error exactly when validation without any bound does not raise it.
func TestBoundErrorsAreTheBounds(t *testing.T) {
	cases := map[string]struct{ old, obj *olmv1.ClusterObjectSet }{}
	for name, tc := range corpus.Cases() {
		cases[name] = struct{ old, obj *olmv1.ClusterObjectSet }{tc.Old, tc.New}
	}
	for i, seed := range fuzzSeeds() {
		if old, obj, ok := fuzzObjects(seed); ok {
			cases[fmt.Sprintf("fuzz seed %d", i)] = struct{ old, obj *olmv1.ClusterObjectSet }{old, obj}
		}
	}
	bounds := 0
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bounds += checkBoundErrors(t, tc.old, tc.obj)
		})
	}
	if bounds == 0 {
		t.Error("no case raised a bound error")
	}
}

// FuzzBoundError is TestBoundErrorsAreTheBounds over FuzzValidate's objects.
func FuzzBoundError(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if old, obj, ok := fuzzObjects(data); ok {
			checkBoundErrors(t, old, obj)
		}
	})
}

// checkBoundErrors validates with the generated bounds and without any, and checks BoundError
// against the difference; it returns the number of bound errors.
func checkBoundErrors(t *testing.T, old, obj *olmv1.ClusterObjectSet) int {
	t.Helper()
	unbounded := withoutBounds(specSchema)
	withB := validateUpdate(old, obj, toWire, specSchema)
	without := map[string]bool{}
	for _, e := range validateUpdate(old, obj, toWire, unbounded) {
		without[string(e.Type)+" "+e.Error()] = true
	}
	n := 0
	for _, e := range withB {
		if e.Detail == SkippedMessage {
			continue
		}
		raisedWithout := without[string(e.Type)+" "+e.Error()]
		if BoundError(e) {
			n++
		}
		if BoundError(e) == raisedWithout {
			t.Errorf("BoundError = %v for %q, raised without bounds: %v", BoundError(e), e.Error(), raisedWithout)
		}
	}
	return n
}

// withoutBounds is s with no minimum, maximum, minItems, maxItems, minLength or maxLength.
func withoutBounds(s *schema) *schema {
	if s == nil {
		return nil
	}
	out := *s
	out.Minimum, out.Maximum, out.MinItems, out.MaxItems, out.MinLength, out.MaxLength = nil, nil, nil, nil, nil, nil
	if s.Properties != nil {
		out.Properties = make(map[string]*schema, len(s.Properties))
		for k, v := range s.Properties {
			out.Properties[k] = withoutBounds(v)
		}
	}
	out.AdditionalProperties = withoutBounds(s.AdditionalProperties)
	out.Items = withoutBounds(s.Items)
	return &out
}
