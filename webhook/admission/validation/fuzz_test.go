package validation

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
)

// FuzzValidate builds a new and an old ClusterObjectSet from the fuzz bytes and checks that the
// validator does not panic, does not change its inputs, gives the same answer twice, adds the
// Skipped error exactly when a blocking error is present, and accepts an unchanged update of what it
// accepts on create. It also checks that leaving the bodies of inline objects unencoded (toWire)
// gives the errors of encoding everything (toWireWhole), and that the API server's own code (the
// oracle, oracle_test.go) gives the same verdict and errors, on create and update, but for
// knownDifferences.
//
// The first byte chooses how the bytes become objects: built field by field from small sets of
// valid and invalid values (even), or decoded as JSON (odd; "<old>\x00<new>").
func FuzzValidate(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}

	o := mustOracle(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		old, obj, ok := fuzzObjects(data)
		if !ok {
			return
		}
		compareWithOracle(t, o, nil, obj)
		compareWithOracle(t, o, old, obj)
		oldBefore, objBefore := old.DeepCopy(), obj.DeepCopy()

		created := ValidateCreate(obj)
		checkList(t, created)
		if diff := cmp.Diff(rendered(created), rendered(ValidateCreate(obj))); diff != "" {
			t.Fatalf("create is not deterministic:\n%s", diff)
		}
		updated := ValidateUpdate(old, obj)
		checkList(t, updated)
		if diff := cmp.Diff(rendered(updated), rendered(ValidateUpdate(old, obj))); diff != "" {
			t.Fatalf("update is not deterministic:\n%s", diff)
		}
		if diff := cmp.Diff(rendered(validateCreate(obj, toWireWhole, specSchema)), rendered(created)); diff != "" {
			t.Fatalf("create: whole encoding (-) and unencoded bodies (+) disagree:\n%s", diff)
		}
		if diff := cmp.Diff(rendered(validateUpdate(old, obj, toWireWhole, specSchema)), rendered(updated)); diff != "" {
			t.Fatalf("update: whole encoding (-) and unencoded bodies (+) disagree:\n%s", diff)
		}
		if diff := cmp.Diff(objBefore, obj); diff != "" {
			t.Fatalf("the new object changed:\n%s", diff)
		}
		if diff := cmp.Diff(oldBefore, old); diff != "" {
			t.Fatalf("the old object changed:\n%s", diff)
		}
		if len(created) == 0 {
			if errs := ValidateUpdate(obj, obj.DeepCopy()); len(errs) != 0 {
				t.Fatalf("valid on create, but an unchanged update is refused: %v", errs)
			}
		}
	})
}

// fuzzSeeds are the seeds of FuzzValidate.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	seeds = append(seeds, []byte{})
	seeds = append(seeds, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	seeds = append(seeds, []byte("\x02\x01\x01\x01\x02\x03\x01\x02\x00\x00\x05\x01\x03\x04\x02\x01\x00\x07\x03"))
	seeds = append(seeds, []byte("\x04\xff\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0\xd0\xe0\xf0\x0f\x1f\x2f\x3f"))
	for _, tc := range corpus.Cases() {
		old := []byte("{}")
		if tc.Old != nil {
			old, _ = json.Marshal(tc.Old)
		}
		obj, _ := json.Marshal(tc.New)
		seeds = append(seeds, append(append(append([]byte{1}, old...), 0), obj...))
	}
	seeds = append(seeds, []byte("\x01{}\x00"+`{"spec":{"phases":[{"name":"a","objects":[{"object":{"apiVersion":5,"kind":"X","metadata":{"labels":{"a":1}}}}]}]}}`))
	return seeds
}

// fuzzObjects makes the old and new ClusterObjectSets of FuzzValidate from the fuzz bytes; ok is
// false when the bytes are not used.
func fuzzObjects(data []byte) (old, obj *olmv1.ClusterObjectSet, ok bool) {
	if len(data) > 0 && data[0]%2 == 1 {
		parts := strings.SplitN(string(data[1:]), "\x00", 2)
		if len(parts) != 2 {
			return nil, nil, false
		}
		old, obj = &olmv1.ClusterObjectSet{}, &olmv1.ClusterObjectSet{}
		if json.Unmarshal([]byte(parts[0]), old) != nil || json.Unmarshal([]byte(parts[1]), obj) != nil {
			return nil, nil, false
		}
	} else {
		s := &source{data: data}
		obj = s.cos()
		if s.pick(3) == 0 {
			old = obj.DeepCopy()
			s.mutate(old)
		} else {
			old = s.cos()
		}
	}
	return old, obj, true
}

// rendered keeps the whole of each error, in order.
func rendered(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Error())
	}
	return out
}

// checkList checks the Skipped error against the rest of the list.
func checkList(t *testing.T, errs field.ErrorList) {
	t.Helper()
	skipped, others := 0, field.ErrorList{}
	for _, e := range errs {
		if e.Field == "<nil>" && e.Detail == SkippedMessage {
			skipped++
			continue
		}
		if e.Field == "" || e.ErrorBody() == "" {
			t.Fatalf("an error without a path or body: %#v", e)
		}
		others = append(others, e)
	}
	if skipped > 1 || (skipped == 1) != blocking(others) {
		t.Fatalf("%d Skipped errors with blocking=%t: %v", skipped, blocking(others), errs)
	}
}

// source turns fuzz bytes into choices; once the bytes run out every choice is 0.
type source struct{ data []byte }

func (s *source) pick(n int) int {
	if len(s.data) == 0 || n <= 1 {
		return 0
	}
	c := int(s.data[0])
	s.data = s.data[1:]
	return c % n
}

func (s *source) of(choices ...string) string { return choices[s.pick(len(choices))] }

var (
	names = []string{"deploy", "a", "", "Deploy", "de.ploy", "-a", "a\xff", "a\xfe", "é", strings.Repeat("a", 63), strings.Repeat("a", 64), "p0", "p1"}
	texts = []string{"k", "", "status.phase", "a..b", ".a", "a/b", "ns", strings.Repeat("x", 200), strings.Repeat("x", 201), strings.Repeat("é", 253), strings.Repeat("x", 254)}
	cps   = []string{"", "Prevent", "IfNoController", "None", "prevent", "Maybe"}
)

func (s *source) cos() *olmv1.ClusterObjectSet {
	c := &olmv1.ClusterObjectSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind},
		ObjectMeta: metav1.ObjectMeta{Name: corpus.Name},
	}
	c.Spec.LifecycleState = olmv1.LifecycleState(s.of("Active", "Archived", "", "Paused"))
	c.Spec.Revision = []int64{1, 2, 0, -1, 1 << 62}[s.pick(5)]
	c.Spec.CollisionProtection = olmv1.CollisionProtection(s.of(cps...))
	c.Spec.ProgressDeadlineMinutes = []int32{0, 10, 720, 9, 721, -5}[s.pick(6)]
	nPhases := s.pick(5)
	if s.pick(16) == 0 {
		nPhases = 21
	}
	for range nPhases {
		c.Spec.Phases = append(c.Spec.Phases, s.phase())
	}
	for range s.pick(4) {
		c.Spec.ProgressionProbes = append(c.Spec.ProgressionProbes, s.probe())
	}
	return c
}

func (s *source) phase() olmv1.ClusterObjectSetPhase {
	p := olmv1.ClusterObjectSetPhase{Name: s.of(names...), CollisionProtection: olmv1.CollisionProtection(s.of(cps...))}
	n := s.pick(5)
	switch {
	case n == 0:
		// nil objects
	case n == 4 && s.pick(8) == 0:
		p.Objects = make([]olmv1.ClusterObjectSetObject, 51)
		for i := range p.Objects {
			p.Objects[i] = olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: "s", Key: "k"}}
		}
	default:
		p.Objects = []olmv1.ClusterObjectSetObject{}
		for range n - 1 {
			p.Objects = append(p.Objects, s.object())
		}
	}
	return p
}

func (s *source) object() olmv1.ClusterObjectSetObject {
	o := olmv1.ClusterObjectSetObject{CollisionProtection: olmv1.CollisionProtection(s.of(cps...))}
	switch s.pick(4) {
	case 0:
		o.Object = unstructured.Unstructured{Object: s.content()}
	case 1:
		o.Ref = olmv1.ObjectSourceRef{Name: s.of(texts...), Namespace: s.of(texts...), Key: s.of(texts...)}
	case 2:
		o.Object = unstructured.Unstructured{Object: s.content()}
		o.Ref = olmv1.ObjectSourceRef{Name: "s", Key: "k"}
	}
	return o
}

// content is an inline object: mostly a ConfigMap, with broken type or metadata fields.
func (s *source) content() map[string]any {
	m := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": s.of(texts...)}}
	meta := map[string]any{"name": s.of(names...), "namespace": s.of("default", "", "Bad_NS")}
	m["metadata"] = meta
	for range s.pick(4) {
		switch s.pick(15) {
		case 0:
			delete(m, "apiVersion")
		case 1:
			delete(m, "kind")
		case 2:
			m["apiVersion"] = s.of("", "a/b/c", "apps/v1", "/v1")
		case 3:
			m["kind"] = s.of("", "Config_Map", "1Map", "Widget")
		case 4:
			m["kind"] = int64(5)
		case 5:
			m["apiVersion"] = nil
		case 6:
			m["metadata"] = s.of("x", "")
		case 7:
			m["metadata"] = nil
		case 8:
			meta["labels"] = map[string]any{s.of("-bad", "ok", "a/b/c"): s.of("v", "not ok!", "")}
		case 9:
			meta["labels"] = map[string]any{"a": int64(1)}
		case 10:
			meta["ownerReferences"] = []any{
				map[string]any{"apiVersion": s.of("v1", "apps/", ""), "kind": s.of("Pod", "Event", ""), "name": "a", "uid": s.of("1", ""), "controller": true},
				map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "2", "controller": s.pick(2) == 0},
			}
		case 11:
			meta["managedFields"] = []any{map[string]any{"manager": s.of("m", ""), "operation": s.of("Apply", "Patch", ""), "fieldsType": s.of("FieldsV1", "", "X")}}
		case 12:
			meta[s.of("color", "generation", "finalizers", "generateName")] = []any{"a/b/c", int64(-1), "a%", nil}[s.pick(4)]
		case 13:
			m["spec"] = map[string]any{"n": 1.5, "l": []any{nil, true, "x", map[string]any{}}, "null": nil}
		case 14:
			m[s.of("spec", "data", "k\xff", "k\xfe")] = s.bodyValue(3)
		}
	}
	return m
}

// bodyValue is a value in the body of an inline object: mostly what JSON changes (integral floats,
// invalid UTF-8) or cannot encode (infinity), and what is left to the whole encoding (json.Number,
// field names that collide once repaired).
func (s *source) bodyValue(depth int) any {
	switch s.pick(12) {
	case 0:
		return int64(1)
	case 1:
		return float64(1)
	case 2:
		return []any{1.5, math.Copysign(0, -1), int64(0), float64(1 << 62), int64(4611686018427388000)}[s.pick(5)]
	case 3:
		return s.of("a\xff", "a\xfe", "a\uFFFD", "a\xff\xfe", "")
	case 4:
		return nil
	case 5:
		return s.pick(2) == 0
	case 6:
		return json.Number("1")
	case 7:
		if s.pick(8) == 0 {
			return math.Inf(1)
		}
		return "x"
	case 8, 9:
		m := map[string]any{}
		if depth > 0 {
			for range s.pick(4) {
				m[s.of("k", "l", "k\xff", "k\xfe", "k\uFFFD")] = s.bodyValue(depth - 1)
			}
		}
		return m
	default:
		l := []any{}
		if depth > 0 {
			for range s.pick(4) {
				l = append(l, s.bodyValue(depth-1))
			}
		}
		return l
	}
}

func (s *source) probe() olmv1.ProgressionProbe {
	p := olmv1.ProgressionProbe{}
	p.Selector.Type = olmv1.SelectorType(s.of("GroupKind", "Label", "", "Name"))
	if s.pick(2) == 0 {
		p.Selector.GroupKind = metav1.GroupKind{Group: s.of("apps", ""), Kind: s.of("Deployment", "")}
	}
	switch s.pick(4) {
	case 1:
		p.Selector.Label.MatchLabels = map[string]string{"a": "b"}
	case 2:
		p.Selector.Label.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}
	case 3:
		p.Selector.Label.MatchLabels = map[string]string{}
	}
	n := s.pick(4)
	if s.pick(16) == 0 {
		n = 21
	}
	for range n {
		a := olmv1.Assertion{Type: olmv1.AssertionType(s.of("ConditionEqual", "FieldsEqual", "FieldValue", "", "Regex"))}
		if s.pick(2) == 0 {
			a.ConditionEqual = olmv1.ConditionEqualProbe{Type: s.of(texts...), Status: s.of("True", "False", "", "Maybe")}
		}
		if s.pick(2) == 0 {
			a.FieldsEqual = olmv1.FieldsEqualProbe{FieldA: s.of(texts...), FieldB: s.of(texts...)}
		}
		if s.pick(2) == 0 {
			a.FieldValue = olmv1.FieldValueProbe{FieldPath: s.of(texts...), Value: s.of(texts...)}
		}
		p.Assertions = append(p.Assertions, a)
	}
	return p
}

// mutate makes the kind of change an update makes.
func (s *source) mutate(c *olmv1.ClusterObjectSet) {
	switch s.pick(9) {
	case 0:
		c.Spec.Revision++
	case 1:
		c.Spec.LifecycleState = olmv1.LifecycleState(s.of("Active", "Archived"))
	case 2:
		c.Spec.CollisionProtection = olmv1.CollisionProtection(s.of(cps...))
	case 3:
		c.Spec.Phases = nil
	case 4:
		c.Spec.Phases = append(c.Spec.Phases, s.phase())
	case 5:
		if len(c.Spec.Phases) > 1 {
			c.Spec.Phases[0], c.Spec.Phases[1] = c.Spec.Phases[1], c.Spec.Phases[0]
		}
	case 6:
		c.Spec.ProgressionProbes = nil
	case 7:
		if len(c.Spec.Phases) > 0 && len(c.Spec.Phases[0].Objects) > 0 {
			c.Spec.Phases[0].Objects[0] = s.object()
		}
	case 8:
		if len(c.Spec.Phases) > 0 && len(c.Spec.Phases[0].Objects) > 0 && !c.Spec.Phases[0].Objects[0].IsRef() {
			c.Spec.Phases[0].Objects[0].Object.Object[s.of("spec", "data")] = s.bodyValue(2)
		}
	}
}
