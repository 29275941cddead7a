package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/validation"
)

// TestDifferential sends every corpus case, and the extra cases below, to the real API server and to
// the pure validator (webhook/admission/validation), and requires the same verdict and the same field errors.
// The extra cases also record what the API server answered, so a change on either side shows.
func TestDifferential(t *testing.T) {
	type tcase struct {
		old, new   *olmv1.ClusterObjectSet
		want       []corpus.Cause
		badRequest bool
	}
	all := map[string]tcase{}
	for name, tc := range corpus.Cases() {
		all["corpus: "+name] = tcase{old: tc.Old, new: tc.New, want: tc.Want}
	}
	for name, tc := range extraCases() {
		all["extra: "+name] = tcase{old: tc.Old, new: tc.New, want: extraWants[name], badRequest: tc.BadRequest}
	}
	ctx := context.Background()
	for name, tc := range all {
		t.Run(name, func(t *testing.T) {
			var mine field.ErrorList
			serverErr := submit(ctx, t, "diff-", name, tc.old, tc.new, func(old, obj *olmv1.ClusterObjectSet) {
				if old == nil {
					mine = validation.ValidateCreate(obj)
					return
				}
				// The validator gets the old object as the API server stored it, as a webhook would.
				mine = validation.ValidateUpdate(old, obj)
			})

			got := rendered(t, mine)
			if tc.badRequest {
				// The API server refuses at decoding, with the first coercion error as the message.
				if !apierrors.IsBadRequest(serverErr) {
					t.Fatalf("API server: want 400 Bad Request, got %v", serverErr)
				}
				var status apierrors.APIStatus
				errors.As(serverErr, &status)
				msg := status.Status().Message
				found := false
				for _, e := range mine {
					if msg == fmt.Sprintf("ClusterObjectSet in version %q cannot be handled as a ClusterObjectSet: %s", "v1", e.Error()) {
						found = true
					}
				}
				if !found {
					t.Errorf("API server said %q; the validator said %v", msg, mine)
				}
			} else if diff := cmp.Diff(causes(t, serverErr), got); diff != "" {
				t.Errorf("API server (-) and validator (+) disagree:\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("validator against the recorded answer (-want +got):\n%s", diff)
			}
		})
	}
}

// rendered renders field errors as the API server's causes, sorted as causes sorts them.
func rendered(t *testing.T, errs field.ErrorList) []corpus.Cause {
	t.Helper()
	if len(errs) == 0 {
		return nil
	}
	return causes(t, apierrors.NewInvalid(olmv1.GroupVersion.WithKind(olmv1.ClusterObjectSetKind).GroupKind(), "x", errs))
}

// extraCase is like corpus.Case, with the answer in extraWants; BadRequest marks a request the API
// server refuses while decoding it (400 Bad Request with one message) rather than in validation.
type extraCase struct {
	Old, New   *olmv1.ClusterObjectSet
	BadRequest bool
}

func xcos(opts ...b.Option) *olmv1.ClusterObjectSet { return b.COS(corpus.Name, opts...) }

func xcm(name string) olmv1.ClusterObjectSetObject {
	return b.Inline(b.ConfigMap("default", name, map[string]string{"k": "v"}))
}

// inline makes an inline object of arbitrary content.
func inline(content map[string]any) olmv1.ClusterObjectSetObject {
	return olmv1.ClusterObjectSetObject{Object: unstructured.Unstructured{Object: content}}
}

// cmWith is a ConfigMap with f applied to its content.
func cmWith(f func(map[string]any)) olmv1.ClusterObjectSetObject {
	o := xcm("x")
	f(o.Object.Object)
	return o
}

func withMeta(kv ...any) func(map[string]any) {
	return func(m map[string]any) {
		meta := m["metadata"].(map[string]any)
		for i := 0; i < len(kv); i += 2 {
			meta[kv[i].(string)] = kv[i+1]
		}
	}
}

func xphase(name string, objs ...olmv1.ClusterObjectSetObject) b.Option {
	return b.WithPhase(name, objs...)
}

func xmutate(c *olmv1.ClusterObjectSet, f func(*olmv1.ClusterObjectSet)) *olmv1.ClusterObjectSet {
	c = c.DeepCopy()
	f(c)
	return c
}

func gk() olmv1.ObjectSelector {
	return olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Group: "apps", Kind: "Deployment"}}
}

func ready() olmv1.Assertion {
	return olmv1.Assertion{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "True"}}
}

func probe(sel olmv1.ObjectSelector, as ...olmv1.Assertion) olmv1.ProgressionProbe {
	return olmv1.ProgressionProbe{Selector: sel, Assertions: as}
}

func manyPhases(n int) b.Option {
	return func(c *olmv1.ClusterObjectSet) {
		for i := range n {
			c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: fmt.Sprintf("p%d", i), Objects: []olmv1.ClusterObjectSetObject{xcm("c")}})
		}
	}
}

// extraCases are cases the corpus lacks: several errors in one object, inline-object metadata,
// strings that are not what they seem, and updates.
func extraCases() map[string]extraCase {
	long := func(n int) string { return strings.Repeat("a", n) }
	base := xcos(xphase("deploy", xcm("a"), b.Ref("s", "", "k")))
	twoPhases := xcos(xphase("first", xcm("a")), xphase("second", xcm("b")))
	both := xcm("both")
	both.Ref = olmv1.ObjectSourceRef{Name: "s", Key: "k"}

	return map[string]extraCase{
		// Several errors at once.
		"multi: blocking schema errors in several fields": {New: xcos(
			b.WithLifecycleState(""), b.WithCollisionProtection("Sometimes"), b.WithRevision(0), b.WithProgressDeadline(5),
			b.WithPhases(olmv1.ClusterObjectSetPhase{Name: long(64)}),
		)},
		"multi: non-blocking schema errors let the CEL rules run": {New: xcos(
			b.WithRevision(0), b.WithProgressDeadline(721),
			xphase("Deploy", olmv1.ClusterObjectSetObject{}, b.Ref("", "", "k")),
		)},
		"multi: CEL errors in phases and probes": {New: xcos(
			xphase("a", both), xphase("a", xcm("b")), xphase("b_c", b.Ref("s", "", "k")),
			b.WithProbes(
				probe(olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind}, ready(), olmv1.Assertion{Type: olmv1.AssertionTypeFieldValue}),
				probe(olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}}},
					olmv1.Assertion{Type: olmv1.AssertionTypeFieldsEqual, FieldsEqual: olmv1.FieldsEqualProbe{FieldA: "a..b", FieldB: ".c"}}),
			),
		)},
		"multi: a schema error in a probe hides CEL errors in phases": {New: xcos(
			xphase("Deploy", olmv1.ClusterObjectSetObject{}),
			b.WithProbes(probe(gk())),
		)},
		"multi: union members wrong in both directions": {New: xcos(b.WithProbes(
			probe(olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, GroupKind: metav1.GroupKind{Kind: "Pod"}}, ready()),
			probe(gk(), olmv1.Assertion{
				Type:        olmv1.AssertionTypeConditionEqual,
				FieldsEqual: olmv1.FieldsEqualProbe{FieldA: "a", FieldB: "b"},
				FieldValue:  olmv1.FieldValueProbe{FieldPath: "a", Value: "b"},
			}),
		))},
		"multi: inline objects missing apiVersion and kind": {New: xcos(xphase("deploy",
			inline(map[string]any{}), inline(map[string]any{"kind": "ConfigMap"}),
		))},
		"multi: a phase name three times": {New: xcos(xphase("a", xcm("1")), xphase("a", xcm("2")), xphase("a", xcm("3")))},
		"multi: two names twice each":     {New: xcos(xphase("a", xcm("1")), xphase("b", xcm("2")), xphase("a", xcm("3")), xphase("b", xcm("4")))},

		// Inline objects: the embedded-resource checks.
		"inline: apiVersion missing":              {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { delete(m, "apiVersion") })))},
		"inline: apiVersion empty":                {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { m["apiVersion"] = "" })))},
		"inline: apiVersion with two slashes":     {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { m["apiVersion"] = "a/b/c" })))},
		"inline: kind with an underscore":         {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { m["kind"] = "Config_Map" })))},
		"inline: kind starting with a digit":      {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { m["kind"] = "1Map" })))},
		"inline: metadata name with a slash":      {New: xcos(xphase("deploy", cmWith(withMeta("name", "a/b"))))},
		"inline: metadata name '..'":              {New: xcos(xphase("deploy", cmWith(withMeta("name", ".."))))},
		"inline: metadata name with dots is fine": {New: xcos(xphase("deploy", cmWith(withMeta("name", "a.b.c"))))},
		"inline: metadata name missing is fine":   {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { delete(m["metadata"].(map[string]any), "name") })))},
		"inline: generateName with a percent":     {New: xcos(xphase("deploy", cmWith(withMeta("generateName", "a%"))))},
		"inline: namespace not a DNS label":       {New: xcos(xphase("deploy", cmWith(withMeta("namespace", "Bad_NS"))))},
		"inline: bad label key and value":         {New: xcos(xphase("deploy", cmWith(withMeta("labels", map[string]any{"-bad": "x", "ok": "not ok!"}))))},
		"inline: annotations over 256 KiB":        {New: xcos(xphase("deploy", cmWith(withMeta("annotations", map[string]any{"a": long(262145)}))))},
		"inline: negative generation":             {New: xcos(xphase("deploy", cmWith(withMeta("generation", int64(-1)))))},
		"inline: bad finalizer":                   {New: xcos(xphase("deploy", cmWith(withMeta("finalizers", []any{"a/b/c"}))))},
		"inline: two controller owner references": {New: xcos(xphase("deploy", cmWith(withMeta("ownerReferences", []any{
			map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "1", "controller": true},
			map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "b", "uid": "2", "controller": true},
		}))))},
		"inline: owner reference without version and uid": {New: xcos(xphase("deploy", cmWith(withMeta("ownerReferences", []any{
			map[string]any{"apiVersion": "apps/", "kind": "Deployment", "name": "a", "uid": ""},
			map[string]any{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "3"},
		}))))},
		"inline: managedFields with a bad operation": {New: xcos(xphase("deploy", cmWith(withMeta("managedFields", []any{
			map[string]any{"manager": "m", "operation": "Patch"},
			map[string]any{"manager": "", "operation": "Apply", "fieldsType": "FieldsV2"},
		}))))},
		"inline: unknown metadata field is dropped": {New: xcos(xphase("deploy", cmWith(withMeta("color", "blue"))))},
		"inline: metadata null is fine":             {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { m["metadata"] = nil })))},
		"inline: custom kind with any content": {New: xcos(xphase("deploy", inline(map[string]any{
			"apiVersion": "example.com/v1alpha1", "kind": "Widget",
			"spec": map[string]any{"n": 1.5, "list": []any{nil, true, "x", map[string]any{}}, "empty": nil},
		})))},
		"inline: kind not a string":        {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { m["kind"] = int64(5) }))), BadRequest: true},
		"inline: apiVersion null":          {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { m["apiVersion"] = nil }))), BadRequest: true},
		"inline: metadata not an object":   {New: xcos(xphase("deploy", cmWith(func(m map[string]any) { m["metadata"] = "x" }))), BadRequest: true},
		"inline: label value not a string": {New: xcos(xphase("deploy", cmWith(withMeta("labels", map[string]any{"a": int64(1)})))), BadRequest: true},

		"inline: bad apiVersion and metadata name": {New: xcos(xphase("deploy", cmWith(func(m map[string]any) {
			m["apiVersion"] = "a/b/c"
			m["metadata"].(map[string]any)["name"] = "a/b"
		})))},
		"inline: dotted name, unknown metadata field and null metadata": {New: xcos(xphase("deploy",
			cmWith(withMeta("name", "a.b.c")), cmWith(withMeta("color", "blue")), cmWith(func(m map[string]any) { m["metadata"] = nil }),
		))},
		"inline: kind not a string, and a CEL error": {New: xcos(xphase("Deploy", cmWith(func(m map[string]any) { m["kind"] = int64(5) }))), BadRequest: true},
		"update: inline kind not a string":           {Old: xcos(), New: xcos(xphase("Deploy", cmWith(func(m map[string]any) { m["kind"] = int64(5) }))), BadRequest: true},

		// Strings and limits.
		"phases: name with dots":                             {New: xcos(xphase("de.ploy", xcm("a")))},
		"phases: name of 40 two-byte characters":             {New: xcos(xphase(strings.Repeat("é", 40), xcm("a")))},
		"phases: name of invalid UTF-8":                      {New: xcos(xphase("a\xff", xcm("a")))},
		"phases: names equal once UTF-8 is repaired":         {New: xcos(xphase("a\xff", xcm("a")), xphase("a\xfe", xcm("b")))},
		"phases: nil objects":                                {New: xcos(b.WithPhases(olmv1.ClusterObjectSetPhase{Name: "deploy"}))},
		"phases: empty objects":                              {New: xcos(b.WithPhases(olmv1.ClusterObjectSetPhase{Name: "deploy", Objects: []olmv1.ClusterObjectSetObject{}}))},
		"ref: name of 253 two-byte characters":               {New: xcos(xphase("deploy", b.Ref(strings.Repeat("é", 253), "", "k")))},
		"ref: name of 254 two-byte characters":               {New: xcos(xphase("deploy", b.Ref(strings.Repeat("é", 254), "", "k")))},
		"ref: only a namespace":                              {New: xcos(xphase("deploy", b.Ref("", "ns", "")))},
		"phases: nil and empty objects":                      {New: xcos(b.WithPhases(olmv1.ClusterObjectSetPhase{Name: "nil"}, olmv1.ClusterObjectSetPhase{Name: "empty", Objects: []olmv1.ClusterObjectSetObject{}}))},
		"ref: names of 253 and 254 two-byte characters":      {New: xcos(xphase("deploy", b.Ref(strings.Repeat("é", 253), "", "k"), b.Ref(strings.Repeat("é", 254), "", "k")))},
		"multi: a probe without assertions hides CEL errors": {New: xcos(xphase("Deploy", olmv1.ClusterObjectSetObject{}), b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Kind: "Pod"}}}))},
		"probes: zero selector":                              {New: xcos(b.WithProbes(probe(olmv1.ObjectSelector{}, ready())))},
		"probes: assertion without a type":                   {New: xcos(b.WithProbes(probe(gk(), olmv1.Assertion{ConditionEqual: ready().ConditionEqual})))},
		"probes: conditionEqual with an empty type":          {New: xcos(b.WithProbes(probe(gk(), olmv1.Assertion{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Status: "True"}})))},
		"probes: label with an empty matchLabels map":        {New: xcos(b.WithProbes(probe(olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchLabels: map[string]string{}}}, ready())))},
		"probes: groupKind with empty group is fine":         {New: xcos(b.WithProbes(probe(olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Kind: "ConfigMap"}}, ready())))},
		"probes: field path of 201":                          {New: xcos(b.WithProbes(probe(gk(), olmv1.Assertion{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: long(201), Value: "v"}})))},
		"collisionProtection: lower case":                    {New: xcos(b.WithCollisionProtection("prevent"))},
		"valid: every field set": {New: xmutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.ProgressDeadlineMinutes = 60
			c.Spec.ProgressionProbes = []olmv1.ProgressionProbe{probe(gk(), ready())}
		})},
		"valid: object with an owner reference and more": {New: xcos(xphase("deploy", cmWith(withMeta("ownerReferences", []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "1", "controller": true}}, "labels", map[string]any{"app": "x"}))))},

		// Updates.
		"update: phases reordered": {Old: twoPhases, New: xmutate(twoPhases, func(c *olmv1.ClusterObjectSet) {
			c.Spec.Phases[0], c.Spec.Phases[1] = c.Spec.Phases[1], c.Spec.Phases[0]
		})},
		"update: inline object swaps a field for another": {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) {
			o := c.Spec.Phases[0].Objects[0].Object.Object
			o["binaryData"] = o["data"]
			delete(o, "data")
		})},
		"update: inline object gains a field": {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.Phases[0].Objects[0].Object.Object["immutable"] = true
		})},
		"update: inline object gets a label": {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.Phases[0].Objects[0].Object.SetLabels(map[string]string{"a": "b"})
		})},
		"update: inline object gets an unknown metadata field": {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.Phases[0].Objects[0].Object.Object["metadata"].(map[string]any)["color"] = "blue"
		})},
		"update: inline object data changes": {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.Phases[0].Objects[0].Object.Object["data"] = map[string]any{"k": "w"}
		})},
		"update: revision, collision protection and lifecycle change": {Old: xcos(b.WithLifecycleState(olmv1.LifecycleStateArchived)), New: xcos(b.WithRevision(3), b.WithCollisionProtection(olmv1.CollisionProtectionNone))},
		"update: phases dropped and revision changed":                 {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases = nil; c.Spec.Revision = 2 })},
		"update: revision to 0":                                       {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Revision = 0 })},
		"update: lifecycle removed":                                   {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.LifecycleState = "" })},
		"update: phase renamed to an invalid name":                    {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[0].Name = "Deploy" })},
		"update: a 21st phase":                                        {Old: xcos(manyPhases(20)), New: xcos(manyPhases(21))},
		"update: ref namespace set":                                   {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[0].Objects[1].Ref.Namespace = "ns" })},
		"update: archived stays archived":                             {Old: xcos(b.WithLifecycleState(olmv1.LifecycleStateArchived)), New: xcos(b.WithLifecycleState(olmv1.LifecycleStateArchived), b.WithProgressDeadline(30))},
		"update: empty phases filled with an invalid phase":           {Old: xcos(), New: xcos(xphase("Bad", xcm("a")))},
		"update: probes removed": {Old: xmutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.ProgressionProbes = []olmv1.ProgressionProbe{probe(gk(), ready())}
		}), New: base},
		"update: probes changed to an invalid one": {Old: xmutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.ProgressionProbes = []olmv1.ProgressionProbe{probe(gk(), ready())}
		}), New: xmutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.ProgressionProbes = []olmv1.ProgressionProbe{probe(gk(), olmv1.Assertion{Type: olmv1.AssertionTypeFieldValue})}
		})},
		"update: inline object loses its kind": {Old: base, New: xmutate(base, func(c *olmv1.ClusterObjectSet) { delete(c.Spec.Phases[0].Objects[0].Object.Object, "kind") })},
	}
}

// extraWants are the answers of kube-apiserver v1.36.3 to the extra cases (none: accepted). For a
// BadRequest case they are the validator's errors, one of which is the API server's message.
var extraWants = map[string][]corpus.Cause{
	"inline: bad apiVersion and metadata name": {
		{Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c"},
		{Field: "spec.phases[0].objects[0].object.metadata.name", Message: "Invalid value: \"a/b\": may not contain '/'"},
	},
	"inline: kind not a string, and a CEL error": {
		{Field: "spec.phases[0].objects[0].object.kind", Message: "Invalid value: 5: must be a string"},
	},
	"update: inline kind not a string": {
		{Field: "spec.phases[0].objects[0].object.kind", Message: "Invalid value: 5: must be a string"},
	},
	"phases: nil and empty objects": {
		corpus.Skipped,
		{Field: "spec.phases[0].objects", Message: "Required value"},
	},
	"ref: names of 253 and 254 two-byte characters": {
		corpus.Skipped,
		{Field: "spec.phases[0].objects[1].ref.name", Message: "Too long: may not be more than 253 bytes"},
	},
	"multi: a probe without assertions hides CEL errors": {
		corpus.Skipped,
		{Field: "spec.progressionProbes[0].assertions", Message: "Required value"},
	},
	"collisionProtection: lower case": {
		corpus.Skipped,
		{Field: "spec.collisionProtection", Message: "Unsupported value: \"prevent\": supported values: \"Prevent\", \"IfNoController\", \"None\""},
	},
	"inline: annotations over 256 KiB": {
		corpus.Skipped,
		{Field: "spec.phases[0].objects[0].object.metadata.annotations", Message: "Too long: may not be more than 262144 bytes"},
	},
	"inline: apiVersion empty": {
		{Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Invalid value: \"\": must not be empty"},
	},
	"inline: apiVersion missing": {
		corpus.Skipped,
		{Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Required value"},
	},
	"inline: apiVersion null": {
		{Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Invalid value: null: must be a string"},
	},
	"inline: apiVersion with two slashes": {
		{Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c"},
	},
	"inline: bad finalizer": {
		{Field: "spec.phases[0].objects[0].object.metadata.finalizers", Message: "Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"},
	},
	"inline: bad label key and value": {
		{Field: "spec.phases[0].objects[0].object.metadata.labels", Message: "Invalid value: \"-bad\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
		{Field: "spec.phases[0].objects[0].object.metadata.labels", Message: "Invalid value: \"not ok!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"},
	},
	"inline: generateName with a percent": {
		{Field: "spec.phases[0].objects[0].object.metadata.generateName", Message: "Invalid value: \"a%\": may not contain '%'"},
	},
	"inline: kind not a string": {
		{Field: "spec.phases[0].objects[0].object.kind", Message: "Invalid value: 5: must be a string"},
	},
	"inline: kind starting with a digit": {
		{Field: "spec.phases[0].objects[0].object.kind", Message: "Invalid value: \"1Map\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"},
	},
	"inline: kind with an underscore": {
		{Field: "spec.phases[0].objects[0].object.kind", Message: "Invalid value: \"Config_Map\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"},
	},
	"inline: label value not a string": {
		{Field: "spec.phases[0].objects[0].object.metadata", Message: "Invalid value: {\"labels\":{\"a\":1},\"name\":\"x\",\"namespace\":\"default\"}: json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string"},
	},
	"inline: managedFields with a bad operation": {
		{Field: "spec.phases[0].objects[0].object.metadata.managedFields[0].operation", Message: "Invalid value: \"Patch\": must be `Apply` or `Update`"},
		{Field: "spec.phases[0].objects[0].object.metadata.managedFields[1].fieldsType", Message: "Invalid value: \"FieldsV2\": must be `FieldsV1`"},
	},
	"inline: metadata name '..'": {
		{Field: "spec.phases[0].objects[0].object.metadata.name", Message: "Invalid value: \"..\": may not be '..'"},
	},
	"inline: metadata name with a slash": {
		{Field: "spec.phases[0].objects[0].object.metadata.name", Message: "Invalid value: \"a/b\": may not contain '/'"},
	},
	"inline: metadata not an object": {
		{Field: "spec.phases[0].objects[0].object.metadata", Message: "Invalid value: \"x\": json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
	},
	"inline: namespace not a DNS label": {
		{Field: "spec.phases[0].objects[0].object.metadata.namespace", Message: "Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"},
	},
	"inline: negative generation": {
		{Field: "spec.phases[0].objects[0].object.metadata.generation", Message: "Invalid value: -1: must be greater than or equal to 0"},
	},
	"inline: owner reference without version and uid": {
		{Field: "spec.phases[0].objects[0].object.metadata.ownerReferences", Message: "Invalid value: {\"apiVersion\":\"v1\",\"kind\":\"Event\",\"name\":\"e\",\"uid\":\"3\"}: /v1, Kind=Event is disallowed from being an owner"},
		{Field: "spec.phases[0].objects[0].object.metadata.ownerReferences.apiVersion", Message: "Invalid value: \"apps/\": version must not be empty"},
		{Field: "spec.phases[0].objects[0].object.metadata.ownerReferences.uid", Message: "Invalid value: \"\": must not be empty"},
	},
	"inline: two controller owner references": {
		{Field: "spec.phases[0].objects[0].object.metadata.ownerReferences", Message: "Invalid value: [{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"a\",\"uid\":\"1\",\"controller\":true},{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"b\",\"uid\":\"2\",\"controller\":true}]: Only one reference can have Controller set to true. Found \"true\" in references for Pod/a and Deployment/b"},
	},
	"multi: CEL errors in phases and probes": {
		{Field: "spec.phases[0].objects[0]", Message: "Invalid value: exactly one of the fields in [object ref] must be set"},
		{Field: "spec.phases[1]", Message: "Duplicate value: {\"name\":\"a\"}"},
		{Field: "spec.phases[2].name", Message: "Invalid value: \"b_c\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."},
		{Field: "spec.progressionProbes[0].assertions[1]", Message: "Invalid value: fieldValue is required when type is FieldValue, and forbidden otherwise"},
		{Field: "spec.progressionProbes[0].selector", Message: "Invalid value: groupKind is required when type is GroupKind, and forbidden otherwise"},
		{Field: "spec.progressionProbes[1].assertions[0].fieldsEqual.fieldA", Message: "Invalid value: \"a..b\": must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character."},
		{Field: "spec.progressionProbes[1].assertions[0].fieldsEqual.fieldB", Message: "Invalid value: \".c\": must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character."},
		{Field: "spec.progressionProbes[1].selector.label", Message: "Invalid value: exactly one of matchLabels or matchExpressions must be set"},
	},
	"multi: a phase name three times": {
		{Field: "spec.phases[1]", Message: "Duplicate value: {\"name\":\"a\"}"},
	},
	"multi: a schema error in a probe hides CEL errors in phases": {
		corpus.Skipped,
		{Field: "spec.progressionProbes[0].assertions", Message: "Required value"},
	},
	"multi: blocking schema errors in several fields": {
		corpus.Skipped,
		{Field: "spec.collisionProtection", Message: "Unsupported value: \"Sometimes\": supported values: \"Prevent\", \"IfNoController\", \"None\""},
		{Field: "spec.lifecycleState", Message: "Required value"},
		{Field: "spec.phases[0].name", Message: "Too long: may not be more than 63 bytes"},
		{Field: "spec.phases[0].objects", Message: "Required value"},
		{Field: "spec.progressDeadlineMinutes", Message: "Invalid value: 5: spec.progressDeadlineMinutes in body should be greater than or equal to 10"},
		{Field: "spec.revision", Message: "Invalid value: 0: spec.revision in body should be greater than or equal to 1"},
	},
	"multi: inline objects missing apiVersion and kind": {
		corpus.Skipped,
		{Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Required value"},
		{Field: "spec.phases[0].objects[0].object.kind", Message: "Required value"},
		{Field: "spec.phases[0].objects[1].object.apiVersion", Message: "Required value"},
	},
	"multi: non-blocking schema errors let the CEL rules run": {
		{Field: "spec.phases[0].name", Message: "Invalid value: \"Deploy\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."},
		{Field: "spec.phases[0].objects[0]", Message: "Invalid value: exactly one of the fields in [object ref] must be set"},
		{Field: "spec.phases[0].objects[1].ref.name", Message: "Invalid value: \"\": spec.phases[0].objects[1].ref.name in body should be at least 1 chars long"},
		{Field: "spec.progressDeadlineMinutes", Message: "Invalid value: 721: spec.progressDeadlineMinutes in body should be less than or equal to 720"},
		{Field: "spec.revision", Message: "Invalid value: 0: spec.revision in body should be greater than or equal to 1"},
	},
	"multi: two names twice each": {
		{Field: "spec.phases[2]", Message: "Duplicate value: {\"name\":\"a\"}"},
		{Field: "spec.phases[3]", Message: "Duplicate value: {\"name\":\"b\"}"},
	},
	"multi: union members wrong in both directions": {
		{Field: "spec.progressionProbes[0].selector", Message: "Invalid value: groupKind is required when type is GroupKind, and forbidden otherwise"},
		{Field: "spec.progressionProbes[0].selector", Message: "Invalid value: label is required when type is Label, and forbidden otherwise"},
		{Field: "spec.progressionProbes[1].assertions[0]", Message: "Invalid value: conditionEqual is required when type is ConditionEqual, and forbidden otherwise"},
		{Field: "spec.progressionProbes[1].assertions[0]", Message: "Invalid value: fieldValue is required when type is FieldValue, and forbidden otherwise"},
		{Field: "spec.progressionProbes[1].assertions[0]", Message: "Invalid value: fieldsEqual is required when type is FieldsEqual, and forbidden otherwise"},
	},
	"phases: name of 40 two-byte characters": {
		{Field: "spec.phases[0].name", Message: "Invalid value: \"éééééééééééééééééééééééééééééééééééééééé\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."},
	},
	"phases: name of invalid UTF-8": {
		{Field: "spec.phases[0].name", Message: "Invalid value: \"a�\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."},
	},
	"phases: name with dots": {
		{Field: "spec.phases[0].name", Message: "Invalid value: \"de.ploy\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."},
	},
	"phases: names equal once UTF-8 is repaired": {
		{Field: "spec.phases[0].name", Message: "Invalid value: \"a�\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."},
		{Field: "spec.phases[1]", Message: "Duplicate value: {\"name\":\"a�\"}"},
		{Field: "spec.phases[1].name", Message: "Invalid value: \"a�\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."},
	},
	"phases: nil objects": {
		corpus.Skipped,
		{Field: "spec.phases[0].objects", Message: "Required value"},
	},
	"probes: assertion without a type": {
		corpus.Skipped,
		{Field: "spec.progressionProbes[0].assertions[0].type", Message: "Required value"},
	},
	"probes: conditionEqual with an empty type": {
		corpus.Skipped,
		{Field: "spec.progressionProbes[0].assertions[0].conditionEqual.type", Message: "Required value"},
	},
	"probes: field path of 201": {
		corpus.Skipped,
		{Field: "spec.progressionProbes[0].assertions[0].fieldValue.fieldPath", Message: "Too long: may not be more than 200 bytes"},
	},
	"probes: label with an empty matchLabels map": {
		{Field: "spec.progressionProbes[0].selector.label", Message: "Invalid value: exactly one of matchLabels or matchExpressions must be set"},
	},
	"probes: zero selector": {
		corpus.Skipped,
		{Field: "spec.progressionProbes[0].selector", Message: "Required value"},
	},
	"ref: name of 254 two-byte characters": {
		corpus.Skipped,
		{Field: "spec.phases[0].objects[0].ref.name", Message: "Too long: may not be more than 253 bytes"},
	},
	"ref: only a namespace": {
		{Field: "spec.phases[0].objects[0].ref.key", Message: "Invalid value: \"\": spec.phases[0].objects[0].ref.key in body should be at least 1 chars long"},
		{Field: "spec.phases[0].objects[0].ref.name", Message: "Invalid value: \"\": spec.phases[0].objects[0].ref.name in body should be at least 1 chars long"},
	},
	"update: a 21st phase": {
		corpus.Skipped,
		{Field: "spec.phases", Message: "Too many: 21: must have at most 20 items"},
	},
	"update: empty phases filled with an invalid phase": {
		{Field: "spec.phases[0].name", Message: "Invalid value: \"Bad\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."},
	},
	"update: inline object data changes": {
		{Field: "spec.phases", Message: "Invalid value: phases is immutable"},
	},
	"update: inline object gains a field": {
		{Field: "spec.phases", Message: "Invalid value: phases is immutable"},
	},
	"update: inline object gets a label": {
		{Field: "spec.phases", Message: "Invalid value: phases is immutable"},
	},
	"update: inline object loses its kind": {
		corpus.Skipped,
		{Field: "spec.phases[0].objects[0].object.kind", Message: "Required value"},
	},
	"update: lifecycle removed": {
		corpus.Skipped,
		{Field: "spec.lifecycleState", Message: "Required value"},
	},
	"update: phase renamed to an invalid name": {
		{Field: "spec.phases", Message: "Invalid value: phases is immutable"},
		{Field: "spec.phases[0].name", Message: "Invalid value: \"Deploy\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."},
	},
	"update: phases dropped and revision changed": {
		{Field: "spec", Message: "Invalid value: phases is immutable"},
		{Field: "spec.revision", Message: "Invalid value: 2: revision is immutable"},
	},
	"update: probes changed to an invalid one": {
		{Field: "spec.progressionProbes[0].assertions[0]", Message: "Invalid value: fieldValue is required when type is FieldValue, and forbidden otherwise"},
	},
	"update: ref namespace set": {
		{Field: "spec.phases", Message: "Invalid value: phases is immutable"},
	},
	"update: revision to 0": {
		{Field: "spec.revision", Message: "Invalid value: 0: revision is immutable"},
		{Field: "spec.revision", Message: "Invalid value: 0: spec.revision in body should be greater than or equal to 1"},
	},
	"update: revision, collision protection and lifecycle change": {
		{Field: "spec.collisionProtection", Message: "Invalid value: \"None\": collisionProtection is immutable"},
		{Field: "spec.lifecycleState", Message: "Invalid value: \"Active\": cannot un-archive"},
		{Field: "spec.revision", Message: "Invalid value: 3: revision is immutable"},
	},
}

// ratchetCase is an update from an object the CRD refuses (stored while a relaxed copy of the CRD was
// in place) to New.
type ratchetCase struct {
	Old, New *olmv1.ClusterObjectSet
	Want     []corpus.Cause
}

// ratchetCases show ratcheting: the API server does not report errors of values an update leaves
// unchanged, except for transition rules and the checks of inline objects. The answers are those of
// kube-apiserver v1.36.3.
func ratchetCases() map[string]ratchetCase {
	withDeadline := func(c *olmv1.ClusterObjectSet) *olmv1.ClusterObjectSet {
		return xmutate(c, func(c *olmv1.ClusterObjectSet) { c.Spec.ProgressDeadlineMinutes = 30 })
	}
	badName := xcos(xphase("Bad_Name", xcm("a")))
	dupSame := xcos(xphase("a", xcm("a")), xphase("a", xcm("a")))
	dupDiff := xcos(xphase("a", xcm("a")), xphase("a", xcm("b")))
	tooMany := xcos(manyPhases(21))
	badProbe := xcos(b.WithProbes(probe(olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind}, ready())))
	noCP := xcos(b.WithCollisionProtection(""))
	noAPIVersion := xcos(xphase("deploy", cmWith(func(m map[string]any) { delete(m, "apiVersion") })))
	untypedSelector := gk()
	untypedSelector.Type = ""
	untypedAssertion := ready()
	untypedAssertion.Type = ""
	noSelectorType := xcos(b.WithProbes(probe(untypedSelector, ready())))
	noAssertionType := xcos(b.WithProbes(probe(gk(), untypedAssertion)))
	return map[string]ratchetCase{
		"unchanged invalid phase name": {Old: badName, New: withDeadline(badName)},
		"invalid phase name, phase added": {Old: badName, New: xmutate(badName, func(c *olmv1.ClusterObjectSet) {
			c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: "Other", Objects: []olmv1.ClusterObjectSetObject{xcm("b")}})
		})},
		"unchanged revision 0":                {Old: xcos(b.WithRevision(0)), New: xcos(b.WithRevision(0), b.WithLifecycleState(olmv1.LifecycleStateArchived))},
		"revision -1 changed to -2":           {Old: xcos(b.WithRevision(-1)), New: xcos(b.WithRevision(-2))},
		"unchanged unknown lifecycle state":   {Old: xcos(b.WithLifecycleState("Paused")), New: withDeadline(xcos(b.WithLifecycleState("Paused")))},
		"unchanged duplicates, same content":  {Old: dupSame, New: withDeadline(dupSame)},
		"unchanged duplicates, other content": {Old: dupDiff, New: withDeadline(dupDiff)},
		"unchanged 21 phases":                 {Old: tooMany, New: withDeadline(tooMany)},
		"21 phases, one renamed":              {Old: tooMany, New: xmutate(tooMany, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[20].Name = "renamed" })},
		"unchanged invalid probe":             {Old: badProbe, New: withDeadline(badProbe)},
		"invalid probe, a probe added": {Old: badProbe, New: xmutate(badProbe, func(c *olmv1.ClusterObjectSet) {
			c.Spec.ProgressionProbes = append(c.Spec.ProgressionProbes, probe(gk(), ready()))
		})},
		"missing field, spec changes":       {Old: noCP, New: withDeadline(noCP)},
		"missing field, only labels change": {Old: noCP, New: xmutate(noCP, func(c *olmv1.ClusterObjectSet) { c.Labels = map[string]string{"a": "b"} })},
		"inline object without apiVersion":  {Old: noAPIVersion, New: withDeadline(noAPIVersion)},
		// A rule that reads a field the old object lacks fails to evaluate.
		"unchanged selector without type":  {Old: noSelectorType, New: withDeadline(noSelectorType)},
		"unchanged assertion without type": {Old: noAssertionType, New: withDeadline(noAssertionType)},
	}
}

// ratchetWants are the answers of kube-apiserver v1.36.3 to ratchetCases (none: accepted).
var ratchetWants = map[string][]corpus.Cause{
	"invalid phase name, phase added": {
		{Field: "spec.phases", Message: "Invalid value: " + corpus.MsgPhasesImmutable},
		{Field: "spec.phases[1].name", Message: "Invalid value: \"Other\": " + corpus.MsgDNSLabel},
	},
	"revision -1 changed to -2": {
		{Field: "spec.revision", Message: "Invalid value: -2: " + corpus.MsgRevisionImmutable},
		{Field: "spec.revision", Message: "Invalid value: -2: spec.revision in body should be greater than or equal to 1"},
	},
	// A transition rule reports even when nothing changed.
	"unchanged unknown lifecycle state": {{Field: "spec.lifecycleState", Message: "Invalid value: \"Paused\": " + corpus.MsgUnarchive}},
	// CEL equality of list-map phases indexes the new list by name, the last phase of a name
	// winning, so an unchanged list that repeats a name with other content is not equal to itself.
	"unchanged duplicates, other content": {{Field: "spec.phases", Message: "Invalid value: " + corpus.MsgPhasesImmutable}},
	"21 phases, one renamed":              {corpus.Skipped, {Field: "spec.phases", Message: "Too many: 21: must have at most 20 items"}},
	"invalid probe, a probe added":        {{Field: "spec.progressionProbes[0].selector", Message: "Invalid value: " + corpus.MsgGroupKindUnion}},
	// A Required error belongs to the object missing the field: spec changed, so it is reported.
	"missing field, spec changes": {corpus.Skipped, {Field: "spec.collisionProtection", Message: "Required value"}},
	// The checks of inline objects do not ratchet.
	"inline object without apiVersion": {corpus.Skipped, {Field: "spec.phases[0].objects[0].object.apiVersion", Message: "Required value"}},
	// The Required error of the absent type ratchets away, so the rules run, and every rule that reads
	// self.type fails to evaluate; evaluation errors do not ratchet.
	"unchanged selector without type": {
		{Field: "spec.progressionProbes[0].selector", Message: `Invalid value: "object": no such key: type evaluating rule: groupKind is required when type is GroupKind, and forbidden otherwise`},
		{Field: "spec.progressionProbes[0].selector", Message: `Invalid value: "object": no such key: type evaluating rule: label is required when type is Label, and forbidden otherwise`},
	},
	"unchanged assertion without type": {
		{Field: "spec.progressionProbes[0].assertions[0]", Message: `Invalid value: "object": no such key: type evaluating rule: conditionEqual is required when type is ConditionEqual, and forbidden otherwise`},
		{Field: "spec.progressionProbes[0].assertions[0]", Message: `Invalid value: "object": no such key: type evaluating rule: fieldValue is required when type is FieldValue, and forbidden otherwise`},
		{Field: "spec.progressionProbes[0].assertions[0]", Message: `Invalid value: "object": no such key: type evaluating rule: fieldsEqual is required when type is FieldsEqual, and forbidden otherwise`},
	},
}

// TestDifferentialRatcheting installs a copy of the CRD under another group with every constraint
// removed, stores objects the real CRD refuses, puts the real constraints in place, and then sends
// the updates of ratchetCases to the API server and to the validator.
func TestDifferentialRatcheting(t *testing.T) {
	ctx := context.Background()
	c := testenv.Env.Client
	dir, err := controlplane.CRDDir()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := controlplane.ReadCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var strict *apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		if crd.Spec.Group == olmv1.GroupVersion.Group && crd.Spec.Names.Kind == olmv1.ClusterObjectSetKind {
			strict = crd.DeepCopy()
		}
	}
	if strict == nil {
		t.Fatal("no ClusterObjectSet CRD in " + dir)
	}
	const group = "ratchet.cos-externalizer.example.com"
	strict.Name = strict.Spec.Names.Plural + "." + group
	strict.Spec.Group = group
	strict.Spec.Names.ShortNames = nil
	relaxed := strict.DeepCopy()
	for i := range relaxed.Spec.Versions {
		relax(relaxed.Spec.Versions[i].Schema.OpenAPIV3Schema)
	}
	// Its deletion at the end of an earlier run (-count) may not be done: the name must be free.
	framework.Delete(ctx, t, c, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: strict.Name}})
	if err := c.Create(ctx, relaxed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, relaxed) })

	// Ratcheted errors come back as warnings: keep them out of the test log.
	cfg := rest.CopyConfig(testenv.Env.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: olmv1.GroupVersion.Version, Resource: strict.Spec.Names.Plural}
	res := dyn.Resource(gvr)
	toServer := func(o *olmv1.ClusterObjectSet, name string) *unstructured.Unstructured {
		t.Helper()
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		u.SetAPIVersion(group + "/" + olmv1.GroupVersion.Version)
		u.SetName(name)
		return u
	}
	fromServer := func(u *unstructured.Unstructured) *olmv1.ClusterObjectSet {
		t.Helper()
		data, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		o := &olmv1.ClusterObjectSet{}
		if err := json.Unmarshal(data, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	// probe is refused by the real constraints and accepted without them.
	probeObj := xcos(b.WithLifecycleState("Paused"))
	probeN := 0
	waitUntil := func(refused bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			probeN++
			_, err := res.Create(ctx, toServer(probeObj, fmt.Sprintf("probe-%d", probeN)), metav1.CreateOptions{})
			if refused == apierrors.IsInvalid(err) && (refused || err == nil) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the CRD change did not take effect: last answer %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitUntil(false)

	cases := ratchetCases()
	olds := map[string]*unstructured.Unstructured{}
	for name, tc := range cases {
		sum := sha256.Sum256([]byte(name))
		u, err := res.Create(ctx, toServer(tc.Old, "ratchet-"+hex.EncodeToString(sum[:6])), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: storing the old object: %v", name, err)
		}
		olds[name] = u
	}

	current := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: strict.Name}, current); err != nil {
		t.Fatal(err)
	}
	current.Spec.Versions = strict.Spec.Versions
	if err := c.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	waitUntil(true)

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stored := olds[name]
			obj := toServer(tc.New, stored.GetName())
			obj.SetResourceVersion(stored.GetResourceVersion())
			_, serverErr := res.Update(ctx, obj, metav1.UpdateOptions{})
			newObj := tc.New.DeepCopy()
			newObj.Name = stored.GetName()
			got := rendered(t, validation.ValidateUpdate(fromServer(stored), newObj))
			if diff := cmp.Diff(causes(t, serverErr), got); diff != "" {
				t.Errorf("API server (-) and validator (+) disagree:\n%s", diff)
			}
			if diff := cmp.Diff(ratchetWants[name], got); diff != "" {
				t.Errorf("validator against the recorded answer (-want +got):\n%s", diff)
			}
		})
	}
}

// relax removes every constraint from a schema, keeping its structure.
func relax(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	s.Enum, s.Required, s.XValidations, s.Pattern = nil, nil, nil, ""
	s.MinLength, s.MaxLength, s.MinItems, s.MaxItems, s.Minimum, s.Maximum = nil, nil, nil, nil, nil, nil
	if s.XListType != nil && *s.XListType == "map" {
		atomic := "atomic"
		s.XListType, s.XListMapKeys = &atomic, nil
	}
	s.XEmbeddedResource = false
	for k, p := range s.Properties {
		relax(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		relax(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		relax(s.AdditionalProperties.Schema)
	}
}
