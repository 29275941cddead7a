package validation

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
)

// causes renders errors as the API server's status causes, sorted by field then message.
func causes(errs field.ErrorList) []corpus.Cause {
	var out []corpus.Cause
	for _, e := range errs {
		out = append(out, corpus.Cause{Field: e.Field, Message: e.ErrorBody()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Field != out[j].Field {
			return out[i].Field < out[j].Field
		}
		return out[i].Message < out[j].Message
	})
	return out
}

func check(old, obj *olmv1.ClusterObjectSet) field.ErrorList {
	if old == nil {
		return ValidateCreate(obj)
	}
	return ValidateUpdate(old, obj)
}

// TestCorpus checks the answers the corpus recorded, and that the API server's code (the oracle)
// agrees, but for knownDifferences.
func TestCorpus(t *testing.T) {
	o := mustOracle(t)
	for name, tc := range corpus.Cases() {
		t.Run(name, func(t *testing.T) {
			got := causes(check(tc.Old, tc.New))
			if diff := cmp.Diff(tc.Want, got); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
			compareWithOracle(t, o, tc.Old, tc.New)
		})
	}
}

// Helpers for the edge cases.

func cos(opts ...b.Option) *olmv1.ClusterObjectSet { return b.COS(corpus.Name, opts...) }

func cm(name string) olmv1.ClusterObjectSetObject {
	return b.Inline(b.ConfigMap("default", name, map[string]string{"k": "v"}))
}

func cmWith(f func(map[string]any)) olmv1.ClusterObjectSetObject {
	o := cm("x")
	f(o.Object.Object)
	return o
}

func inline(content map[string]any) olmv1.ClusterObjectSetObject {
	return olmv1.ClusterObjectSetObject{Object: unstructured.Unstructured{Object: content}}
}

func mutate(c *olmv1.ClusterObjectSet, f func(*olmv1.ClusterObjectSet)) *olmv1.ClusterObjectSet {
	c = c.DeepCopy()
	f(c)
	return c
}

func phases(n int) b.Option {
	return func(c *olmv1.ClusterObjectSet) {
		for i := range n {
			c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: fmt.Sprintf("p%d", i), Objects: []olmv1.ClusterObjectSetObject{cm("c")}})
		}
	}
}

func ready() olmv1.Assertion {
	return olmv1.Assertion{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "True"}}
}

func dnsErr(p, name string) corpus.Cause {
	return corpus.Cause{Field: p, Message: fmt.Sprintf("Invalid value: %q: %s", name, corpus.MsgDNSLabel)}
}

// TestEdgeCases covers what the corpus lacks. Every expectation here is what kube-apiserver v1.36.3
// answered to the same request (the differential test in test/integration/api sends these and more);
// the oracle agrees, but for knownDifferences.
func TestEdgeCases(t *testing.T) {
	o := mustOracle(t)
	for name, tc := range edgeCases() {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.Want, causes(check(tc.Old, tc.New))); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
			compareWithOracle(t, o, tc.Old, tc.New)
		})
	}
}

func edgeCases() map[string]corpus.Case {
	base := cos(b.WithPhase("deploy", cm("a"), b.Ref("s", "", "k")))
	twoPhases := cos(b.WithPhase("first", cm("a")), b.WithPhase("second", cm("b")))
	immutable := corpus.Cause{Field: "spec.phases", Message: "Invalid value: " + corpus.MsgPhasesImmutable}

	return map[string]corpus.Case{
		"blocking schema errors in several fields, CEL skipped": {
			New: cos(b.WithLifecycleState(""), b.WithCollisionProtection("Sometimes"), b.WithRevision(0), b.WithProgressDeadline(5),
				b.WithPhases(olmv1.ClusterObjectSetPhase{Name: strings.Repeat("A", 64)})),
			Want: []corpus.Cause{
				corpus.Skipped,
				{Field: "spec.collisionProtection", Message: `Unsupported value: "Sometimes": supported values: "Prevent", "IfNoController", "None"`},
				{Field: "spec.lifecycleState", Message: "Required value"},
				{Field: "spec.phases[0].name", Message: "Too long: may not be more than 63 bytes"},
				{Field: "spec.phases[0].objects", Message: "Required value"},
				{Field: "spec.progressDeadlineMinutes", Message: "Invalid value: 5: spec.progressDeadlineMinutes in body should be greater than or equal to 10"},
				{Field: "spec.revision", Message: "Invalid value: 0: spec.revision in body should be greater than or equal to 1"},
			},
		},
		"non-blocking schema errors let the CEL rules run": {
			New: cos(b.WithRevision(0), b.WithProgressDeadline(721), b.WithPhase("Deploy", olmv1.ClusterObjectSetObject{}, b.Ref("", "", "k"))),
			Want: []corpus.Cause{
				dnsErr("spec.phases[0].name", "Deploy"),
				{Field: "spec.phases[0].objects[0]", Message: "Invalid value: " + corpus.MsgExactlyOne},
				{Field: "spec.phases[0].objects[1].ref.name", Message: `Invalid value: "": spec.phases[0].objects[1].ref.name in body should be at least 1 chars long`},
				{Field: "spec.progressDeadlineMinutes", Message: "Invalid value: 721: spec.progressDeadlineMinutes in body should be less than or equal to 720"},
				{Field: "spec.revision", Message: "Invalid value: 0: spec.revision in body should be greater than or equal to 1"},
			},
		},
		"a schema error in a probe hides the CEL errors of phases": {
			New:  cos(b.WithPhase("Deploy", olmv1.ClusterObjectSetObject{}), b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Kind: "Pod"}}})),
			Want: []corpus.Cause{corpus.Skipped, {Field: "spec.progressionProbes[0].assertions", Message: "Required value"}},
		},
		"inline objects missing apiVersion and kind": {
			New: cos(b.WithPhase("deploy", inline(map[string]any{}), inline(map[string]any{"kind": "ConfigMap"}))),
			Want: []corpus.Cause{
				corpus.Skipped,
				{Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Required value"},
				{Field: "spec.phases[0].objects[0].object.kind", Message: "Required value"},
				{Field: "spec.phases[0].objects[1].object.apiVersion", Message: "Required value"},
			},
		},
		"inline object with a bad apiVersion and metadata name": {
			New: cos(b.WithPhase("deploy", cmWith(func(m map[string]any) {
				m["apiVersion"] = "a/b/c"
				m["metadata"].(map[string]any)["name"] = "a/b"
			}))),
			Want: []corpus.Cause{
				{Field: "spec.phases[0].objects[0].object.apiVersion", Message: `Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c`},
				{Field: "spec.phases[0].objects[0].object.metadata.name", Message: `Invalid value: "a/b": may not contain '/'`},
			},
		},
		"inline object metadata: dots in a name, unknown fields and null are fine": {
			New: cos(b.WithPhase("deploy",
				cmWith(func(m map[string]any) { m["metadata"].(map[string]any)["name"] = "a.b.c" }),
				cmWith(func(m map[string]any) { m["metadata"].(map[string]any)["color"] = "blue" }),
				cmWith(func(m map[string]any) { m["metadata"] = nil }),
			)),
		},
		"inline object with two controller owner references (v1.36 messages)": {
			New: cos(b.WithPhase("deploy", cmWith(func(m map[string]any) {
				m["metadata"].(map[string]any)["ownerReferences"] = []any{
					map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "1", "controller": true},
					map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "b", "uid": "2", "controller": true},
				}
			}))),
			Want: []corpus.Cause{{
				Field:   "spec.phases[0].objects[0].object.metadata.ownerReferences",
				Message: `Invalid value: [{"apiVersion":"v1","kind":"Pod","name":"a","uid":"1","controller":true},{"apiVersion":"apps/v1","kind":"Deployment","name":"b","uid":"2","controller":true}]: Only one reference can have Controller set to true. Found "true" in references for Pod/a and Deployment/b`,
			}},
		},
		"a phase name with dots": {
			New:  cos(b.WithPhase("de.ploy", cm("a"))),
			Want: []corpus.Cause{dnsErr("spec.phases[0].name", "de.ploy")},
		},
		"a phase name three times: only the second is a duplicate": {
			New:  cos(b.WithPhase("a", cm("1")), b.WithPhase("a", cm("2")), b.WithPhase("a", cm("3"))),
			Want: []corpus.Cause{{Field: "spec.phases[1]", Message: `Duplicate value: {"name":"a"}`}},
		},
		"phase names equal once invalid UTF-8 is repaired": {
			New: cos(b.WithPhase("a\xff", cm("a")), b.WithPhase("a\xfe", cm("b"))),
			Want: []corpus.Cause{
				dnsErr("spec.phases[0].name", "a\uFFFD"),
				{Field: "spec.phases[1]", Message: "Duplicate value: {\"name\":\"a\uFFFD\"}"},
				dnsErr("spec.phases[1].name", "a\uFFFD"),
			},
		},
		"a nil objects list is absent, an empty one is not": {
			New:  cos(b.WithPhases(olmv1.ClusterObjectSetPhase{Name: "nil"}, olmv1.ClusterObjectSetPhase{Name: "empty", Objects: []olmv1.ClusterObjectSetObject{}})),
			Want: []corpus.Cause{corpus.Skipped, {Field: "spec.phases[0].objects", Message: "Required value"}},
		},
		"lengths count characters, not bytes": {
			New:  cos(b.WithPhase("deploy", b.Ref(strings.Repeat("é", 253), "", "k"), b.Ref(strings.Repeat("é", 254), "", "k"))),
			Want: []corpus.Cause{corpus.Skipped, {Field: "spec.phases[0].objects[1].ref.name", Message: "Too long: may not be more than 253 bytes"}},
		},
		"an empty matchLabels map is a label selector with neither form": {
			New: cos(b.WithProbes(olmv1.ProgressionProbe{
				Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchLabels: map[string]string{}}},
				Assertions: []olmv1.Assertion{ready()},
			})),
			Want: []corpus.Cause{{Field: "spec.progressionProbes[0].selector.label", Message: "Invalid value: " + corpus.MsgLabelExactlyOne}},
		},
		"update: an old selector without type (stored under a laxer CRD) fails to evaluate the rules": {
			Old: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{GroupKind: metav1.GroupKind{Kind: "Pod"}},
				Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "True"}}}})),
			New: cos(b.WithProgressDeadline(30), b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{GroupKind: metav1.GroupKind{Kind: "Pod"}},
				Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "True"}}}})),
			Want: []corpus.Cause{
				{Field: "spec.progressionProbes[0].selector", Message: `Invalid value: "object": no such key: type evaluating rule: groupKind is required when type is GroupKind, and forbidden otherwise`},
				{Field: "spec.progressionProbes[0].selector", Message: `Invalid value: "object": no such key: type evaluating rule: label is required when type is Label, and forbidden otherwise`},
			},
		},
		"create: a selector without type is Required, and the rules do not run": {
			New: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{GroupKind: metav1.GroupKind{Kind: "Pod"}},
				Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "True"}}}})),
			Want: []corpus.Cause{corpus.Skipped, {Field: "spec.progressionProbes[0].selector.type", Message: "Required value"}},
		},
		"update: phases reordered": {
			Old: twoPhases,
			New: mutate(twoPhases, func(c *olmv1.ClusterObjectSet) {
				c.Spec.Phases[0], c.Spec.Phases[1] = c.Spec.Phases[1], c.Spec.Phases[0]
			}),
		},
		"update: an inline object swaps a field for another (CEL map equality compares shared keys only)": {
			Old: base,
			New: mutate(base, func(c *olmv1.ClusterObjectSet) {
				o := c.Spec.Phases[0].Objects[0].Object.Object
				o["binaryData"] = o["data"]
				delete(o, "data")
			}),
		},
		"update: an inline object gains a field": {
			Old:  base,
			New:  mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[0].Objects[0].Object.Object["immutable"] = true }),
			Want: []corpus.Cause{immutable},
		},
		"update: an unknown metadata field of an inline object is dropped": {
			Old: base,
			New: mutate(base, func(c *olmv1.ClusterObjectSet) {
				c.Spec.Phases[0].Objects[0].Object.Object["metadata"].(map[string]any)["color"] = "blue"
			}),
		},
		"update: revision to 0 breaks a schema rule and a transition rule": {
			Old: base,
			New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Revision = 0 }),
			Want: []corpus.Cause{
				{Field: "spec.revision", Message: "Invalid value: 0: " + corpus.MsgRevisionImmutable},
				{Field: "spec.revision", Message: "Invalid value: 0: spec.revision in body should be greater than or equal to 1"},
			},
		},
		"update: everything immutable changes at once": {
			Old: cos(b.WithLifecycleState(olmv1.LifecycleStateArchived)),
			New: cos(b.WithRevision(3), b.WithCollisionProtection(olmv1.CollisionProtectionNone)),
			Want: []corpus.Cause{
				{Field: "spec.collisionProtection", Message: `Invalid value: "None": ` + corpus.MsgCPImmutable},
				{Field: "spec.lifecycleState", Message: `Invalid value: "Active": ` + corpus.MsgUnarchive},
				{Field: "spec.revision", Message: "Invalid value: 3: " + corpus.MsgRevisionImmutable},
			},
		},
		"update: phases dropped and revision changed": {
			Old: base,
			New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases = nil; c.Spec.Revision = 2 }),
			Want: []corpus.Cause{
				{Field: "spec", Message: "Invalid value: " + corpus.MsgPhasesImmutable},
				{Field: "spec.revision", Message: "Invalid value: 2: " + corpus.MsgRevisionImmutable},
			},
		},
		"update: a phase renamed to an invalid name": {
			Old:  base,
			New:  mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[0].Name = "Deploy" }),
			Want: []corpus.Cause{immutable, dnsErr("spec.phases[0].name", "Deploy")},
		},
		"update: empty phases filled with an invalid phase": {
			Old:  cos(),
			New:  cos(b.WithPhase("Bad", cm("a"))),
			Want: []corpus.Cause{dnsErr("spec.phases[0].name", "Bad")},
		},
		"update: a 21st phase": {
			Old:  cos(phases(20)),
			New:  cos(phases(21)),
			Want: []corpus.Cause{corpus.Skipped, {Field: "spec.phases", Message: "Too many: 21: must have at most 20 items"}},
		},

		// Ratcheting: old objects the CRD refuses (the differential test stores them through a relaxed
		// copy of the CRD).
		"ratchet: an unchanged invalid phase name": {
			Old: cos(b.WithPhase("Bad_Name", cm("a"))),
			New: cos(b.WithPhase("Bad_Name", cm("a")), b.WithProgressDeadline(30)),
		},
		"ratchet: an unchanged invalid probe": {
			Old: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind}, Assertions: []olmv1.Assertion{ready()}})),
			New: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind}, Assertions: []olmv1.Assertion{ready()}}), b.WithProgressDeadline(30)),
		},
		"ratchet: 21 unchanged phases": {Old: cos(phases(21)), New: cos(phases(21), b.WithProgressDeadline(30))},
		"ratchet: 21 phases, one renamed": {
			Old:  cos(phases(21)),
			New:  mutate(cos(phases(21)), func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[20].Name = "renamed" }),
			Want: []corpus.Cause{corpus.Skipped, {Field: "spec.phases", Message: "Too many: 21: must have at most 20 items"}},
		},
		"ratchet: a Required error belongs to the parent, which changed": {
			Old:  cos(b.WithCollisionProtection("")),
			New:  cos(b.WithCollisionProtection(""), b.WithProgressDeadline(30)),
			Want: []corpus.Cause{corpus.Skipped, {Field: "spec.collisionProtection", Message: "Required value"}},
		},
		"ratchet: transition rules always report": {
			Old:  cos(b.WithLifecycleState("Paused")),
			New:  cos(b.WithLifecycleState("Paused"), b.WithProgressDeadline(30)),
			Want: []corpus.Cause{{Field: "spec.lifecycleState", Message: `Invalid value: "Paused": ` + corpus.MsgUnarchive}},
		},
		"ratchet: repeated names with other content are not equal to themselves": {
			Old:  cos(b.WithPhase("a", cm("a")), b.WithPhase("a", cm("b"))),
			New:  cos(b.WithPhase("a", cm("a")), b.WithPhase("a", cm("b")), b.WithProgressDeadline(30)),
			Want: []corpus.Cause{immutable},
		},
		"ratchet: inline objects are checked anyway": {
			Old:  cos(b.WithPhase("deploy", cmWith(func(m map[string]any) { delete(m, "apiVersion") }))),
			New:  cos(b.WithPhase("deploy", cmWith(func(m map[string]any) { delete(m, "apiVersion") })), b.WithProgressDeadline(30)),
			Want: []corpus.Cause{corpus.Skipped, {Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Required value"}},
		},
	}
}

// TestDecodeErrors: inline objects the API server cannot decode are refused with 400 Bad Request
// before validation, with one message; the validator returns those errors and nothing else.
func TestDecodeErrors(t *testing.T) {
	cases := map[string]struct {
		obj  olmv1.ClusterObjectSetObject
		want []corpus.Cause
	}{
		"kind not a string": {
			obj:  cmWith(func(m map[string]any) { m["kind"] = int64(5) }),
			want: []corpus.Cause{{Field: "spec.phases[0].objects[0].object.kind", Message: "Invalid value: 5: must be a string"}},
		},
		"apiVersion null": {
			obj:  cmWith(func(m map[string]any) { m["apiVersion"] = nil }),
			want: []corpus.Cause{{Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Invalid value: null: must be a string"}},
		},
		"metadata not an object": {
			obj:  cmWith(func(m map[string]any) { m["metadata"] = "x" }),
			want: []corpus.Cause{{Field: "spec.phases[0].objects[0].object.metadata", Message: `Invalid value: "x": json: cannot unmarshal string into Go value of type v1.ObjectMeta`}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// A CEL error elsewhere is not reported: validation never runs.
			obj := cos(b.WithPhase("Deploy", tc.obj))
			if diff := cmp.Diff(tc.want, causes(ValidateCreate(obj))); diff != "" {
				t.Errorf("create (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, causes(ValidateUpdate(cos(), obj))); diff != "" {
				t.Errorf("update (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContract(t *testing.T) {
	valid := cos(b.WithPhase("deploy", cm("a")))
	invalid := cos(b.WithPhase("Deploy", cm("a")), b.WithRevision(0))

	t.Run("Skipped renders as the API server's cause", func(t *testing.T) {
		e := Skipped()
		if got := (corpus.Cause{Field: e.Field, Message: e.ErrorBody()}); got != corpus.Skipped {
			t.Errorf("got %+v, want %+v", got, corpus.Skipped)
		}
	})
	t.Run("a nil old object is a create", func(t *testing.T) {
		if diff := cmp.Diff(causes(ValidateCreate(invalid)), causes(ValidateUpdate(nil, invalid))); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("nil objects do not panic", func(t *testing.T) {
		if len(ValidateCreate(nil)) != 1 || len(ValidateUpdate(valid, nil)) != 1 {
			t.Error("want one error for a nil object")
		}
	})
	t.Run("an unchanged valid object is a valid update", func(t *testing.T) {
		if errs := ValidateUpdate(valid, valid.DeepCopy()); len(errs) != 0 {
			t.Error(errs)
		}
	})
	t.Run("metadata and status are not validated", func(t *testing.T) {
		odd := mutate(valid, func(c *olmv1.ClusterObjectSet) {
			c.Name = "Not A Name"
			c.Status.ObservedPhases = []olmv1.ObservedPhase{{Name: "X", Digest: "nope"}}
		})
		if errs := ValidateCreate(odd); len(errs) != 0 {
			t.Error(errs)
		}
	})
	t.Run("inputs are not changed", func(t *testing.T) {
		for _, o := range []*olmv1.ClusterObjectSet{valid, invalid} {
			before := o.DeepCopy()
			ValidateCreate(o)
			ValidateUpdate(o, o)
			if diff := cmp.Diff(before, o); diff != "" {
				t.Error(diff)
			}
		}
	})
	t.Run("Go values that are not JSON values are encoded as a client encodes them", func(t *testing.T) {
		o := cos(b.WithPhase("deploy", inline(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "n": 3, "m": map[string]string{"a": "b"}})))
		if errs := ValidateCreate(o); len(errs) != 0 {
			t.Error(errs)
		}
	})
	t.Run("an inline object no client could send", func(t *testing.T) {
		o := cos(b.WithPhase("deploy", cm("a"), inline(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "f": math.NaN()})))
		errs := ValidateCreate(o)
		if len(errs) != 1 || errs[0].Field != "spec.phases[0].objects[1].object" || !strings.Contains(errs[0].Detail, "cannot be encoded as JSON") {
			t.Errorf("got %v", errs)
		}
	})
}
