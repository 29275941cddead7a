// Package corpus holds ClusterObjectSets the API must accept or refuse, each with the exact field
// errors the API server returns. Every invalid case breaks exactly one rule, because the API server
// skips CEL rules once a schema rule has failed. The API tests send the corpus to a real API server;
// the validating webhook's pure validator must give the same verdicts.
package corpus

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
)

// Cause is one field error as the API server reports it in status.details.causes.
type Cause struct {
	Field   string
	Message string
}

// Case is a create (Old nil) or an update from Old to New.
type Case struct {
	Old *olmv1.ClusterObjectSet
	New *olmv1.ClusterObjectSet
	// Want is empty when the request must succeed.
	Want []Cause
}

// Skipped is the cause the API server adds when a schema error kept it from running the CEL rules.
var Skipped = Cause{Field: "<nil>", Message: "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"}

// Name every case uses for its object; tests rename as they need.
const Name = "corpus"

// Messages of the CRD's CEL rules.
const (
	MsgExactlyOne        = "exactly one of the fields in [object ref] must be set"
	MsgRevisionImmutable = "revision is immutable"
	MsgPhasesImmutable   = "phases is immutable"
	MsgCPImmutable       = "collisionProtection is immutable"
	MsgUnarchive         = "cannot un-archive"
	MsgDNSLabel          = "the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."
	MsgFieldPath         = "must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character."
	MsgGroupKindUnion    = "groupKind is required when type is GroupKind, and forbidden otherwise"
	MsgLabelUnion        = "label is required when type is Label, and forbidden otherwise"
	MsgLabelExactlyOne   = "exactly one of matchLabels or matchExpressions must be set"
	MsgConditionEqual    = "conditionEqual is required when type is ConditionEqual, and forbidden otherwise"
	MsgFieldsEqual       = "fieldsEqual is required when type is FieldsEqual, and forbidden otherwise"
	MsgFieldValue        = "fieldValue is required when type is FieldValue, and forbidden otherwise"
)

func cm(name string) olmv1.ClusterObjectSetObject {
	return b.Inline(b.ConfigMap("default", name, map[string]string{"k": "v"}))
}

func cos(opts ...b.Option) *olmv1.ClusterObjectSet { return b.COS(Name, opts...) }

func withPhase(objs ...olmv1.ClusterObjectSetObject) b.Option { return b.WithPhase("deploy", objs...) }

func gkProbe(assertions ...olmv1.Assertion) olmv1.ProgressionProbe {
	return olmv1.ProgressionProbe{
		Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Group: "apps", Kind: "Deployment"}},
		Assertions: assertions,
	}
}

func condEqual() olmv1.Assertion {
	return olmv1.Assertion{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "True"}}
}

func fieldValue(path string) olmv1.Assertion {
	return olmv1.Assertion{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: path, Value: "Bound"}}
}

func fieldsEqual(a, bb string) olmv1.Assertion {
	return olmv1.Assertion{Type: olmv1.AssertionTypeFieldsEqual, FieldsEqual: olmv1.FieldsEqualProbe{FieldA: a, FieldB: bb}}
}

func phases(n int) b.Option {
	return func(c *olmv1.ClusterObjectSet) {
		for i := range n {
			c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{
				Name: "p" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Objects: []olmv1.ClusterObjectSetObject{cm("c")},
			})
		}
	}
}

func mutate(c *olmv1.ClusterObjectSet, f func(*olmv1.ClusterObjectSet)) *olmv1.ClusterObjectSet {
	c = c.DeepCopy()
	f(c)
	return c
}

// Cases returns the corpus, keyed by a description.
func Cases() map[string]Case {
	base := cos(withPhase(cm("a"), b.Ref("s", "", "k")))
	noObject := olmv1.ClusterObjectSetObject{}
	both := cm("both")
	both.Ref = olmv1.ObjectSourceRef{Name: "s", Key: "k"}
	noKind := olmv1.ClusterObjectSetObject{Object: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "metadata": map[string]any{"name": "x"}}}}
	long := func(n int) string { return strings.Repeat("a", n) }

	return map[string]Case{
		// Creates that must succeed.
		"valid: no phases":                 {New: cos()},
		"valid: inline and ref objects":    {New: base},
		"valid: 20 phases":                 {New: cos(phases(20))},
		"valid: 50 objects in a phase":     {New: cos(b.WithPhase("many", b.InlineConfigMaps("default", "c", 50)...))},
		"valid: archived at creation":      {New: cos(b.WithLifecycleState(olmv1.LifecycleStateArchived))},
		"valid: collision protection None": {New: cos(b.WithCollisionProtection(olmv1.CollisionProtectionNone))},
		"valid: phase and object overrides": {New: mutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.Phases[0].CollisionProtection = olmv1.CollisionProtectionIfNoController
			c.Spec.Phases[0].Objects[0].CollisionProtection = olmv1.CollisionProtectionNone
		})},
		"valid: deadline 10":                  {New: cos(b.WithProgressDeadline(10))},
		"valid: deadline 720":                 {New: cos(b.WithProgressDeadline(720))},
		"valid: phase name of 63":             {New: cos(b.WithPhase(long(63), cm("a")))},
		"valid: ref lengths at the limit":     {New: cos(withPhase(b.Ref(long(253), long(63), long(253))))},
		"valid: probes of every kind":         {New: cos(b.WithProbes(gkProbe(condEqual(), fieldValue("status.phase"), fieldsEqual("spec.replicas", "status.readyReplicas")), olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}, Assertions: []olmv1.Assertion{condEqual()}}))},
		"valid: label probe with expressions": {New: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}}, Assertions: []olmv1.Assertion{condEqual()}}))},

		// Creates that must fail.
		"object: neither object nor ref":   {New: cos(withPhase(noObject)), Want: []Cause{{"spec.phases[0].objects[0]", "Invalid value: exactly one of the fields in [object ref] must be set"}}},
		"object: both object and ref":      {New: cos(withPhase(both)), Want: []Cause{{"spec.phases[0].objects[0]", "Invalid value: exactly one of the fields in [object ref] must be set"}}},
		"object: inline without kind":      {New: cos(withPhase(noKind)), Want: []Cause{Skipped, {"spec.phases[0].objects[0].object.kind", "Required value"}}},
		"object: bad collision protection": {New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[0].Objects[0].CollisionProtection = "Maybe" }), Want: []Cause{Skipped, {"spec.phases[0].objects[0].collisionProtection", "Unsupported value: \"Maybe\": supported values: \"Prevent\", \"IfNoController\", \"None\""}}},
		"revision: zero":                   {New: cos(b.WithRevision(0)), Want: []Cause{{"spec.revision", "Invalid value: 0: spec.revision in body should be greater than or equal to 1"}}},
		"revision: negative":               {New: cos(b.WithRevision(-3)), Want: []Cause{{"spec.revision", "Invalid value: -3: spec.revision in body should be greater than or equal to 1"}}},
		"lifecycle: unknown state":         {New: cos(b.WithLifecycleState("Paused")), Want: []Cause{Skipped, {"spec.lifecycleState", "Unsupported value: \"Paused\": supported values: \"Active\", \"Archived\""}}},
		"lifecycle: missing":               {New: cos(b.WithLifecycleState("")), Want: []Cause{Skipped, {"spec.lifecycleState", "Required value"}}},
		"collisionProtection: missing":     {New: cos(b.WithCollisionProtection("")), Want: []Cause{Skipped, {"spec.collisionProtection", "Required value"}}},
		"collisionProtection: unknown":     {New: cos(b.WithCollisionProtection("Sometimes")), Want: []Cause{Skipped, {"spec.collisionProtection", "Unsupported value: \"Sometimes\": supported values: \"Prevent\", \"IfNoController\", \"None\""}}},
		"phases: 21":                       {New: cos(phases(21)), Want: []Cause{Skipped, {"spec.phases", "Too many: 21: must have at most 20 items"}}},
		"phases: 51 objects":               {New: cos(b.WithPhase("many", b.InlineConfigMaps("default", "c", 51)...)), Want: []Cause{Skipped, {"spec.phases[0].objects", "Too many: 51: must have at most 50 items"}}},
		"phases: uppercase name":           {New: cos(b.WithPhase("Deploy", cm("a"))), Want: []Cause{{"spec.phases[0].name", "Invalid value: \"Deploy\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."}}},
		"phases: underscore name":          {New: cos(b.WithPhase("de_ploy", cm("a"))), Want: []Cause{{"spec.phases[0].name", "Invalid value: \"de_ploy\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."}}},
		"phases: leading hyphen":           {New: cos(b.WithPhase("-deploy", cm("a"))), Want: []Cause{{"spec.phases[0].name", "Invalid value: \"-deploy\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."}}},
		"phases: name of 64":               {New: cos(b.WithPhase(long(64), cm("a"))), Want: []Cause{Skipped, {"spec.phases[0].name", "Too long: may not be more than 63 bytes"}}},
		"phases: empty name":               {New: cos(b.WithPhase("", cm("a"))), Want: []Cause{{"spec.phases[0].name", "Invalid value: \"\": spec.phases[0].name in body should be at least 1 chars long"}, {"spec.phases[0].name", "Invalid value: \"\": the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."}}},
		"phases: duplicate names":          {New: cos(b.WithPhase("deploy", cm("a")), b.WithPhase("deploy", cm("b"))), Want: []Cause{{"spec.phases[1]", "Duplicate value: {\"name\":\"deploy\"}"}}},
		"phases: bad collision protection": {New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[0].CollisionProtection = "Maybe" }), Want: []Cause{Skipped, {"spec.phases[0].collisionProtection", "Unsupported value: \"Maybe\": supported values: \"Prevent\", \"IfNoController\", \"None\""}}},
		"ref: empty name":                  {New: cos(withPhase(b.Ref("", "", "k"))), Want: []Cause{{"spec.phases[0].objects[0].ref.name", "Invalid value: \"\": spec.phases[0].objects[0].ref.name in body should be at least 1 chars long"}}},
		"ref: name of 254":                 {New: cos(withPhase(b.Ref(long(254), "", "k"))), Want: []Cause{Skipped, {"spec.phases[0].objects[0].ref.name", "Too long: may not be more than 253 bytes"}}},
		"ref: namespace of 64":             {New: cos(withPhase(b.Ref("s", long(64), "k"))), Want: []Cause{Skipped, {"spec.phases[0].objects[0].ref.namespace", "Too long: may not be more than 63 bytes"}}},
		"ref: empty key":                   {New: cos(withPhase(b.Ref("s", "", ""))), Want: []Cause{{"spec.phases[0].objects[0].ref.key", "Invalid value: \"\": spec.phases[0].objects[0].ref.key in body should be at least 1 chars long"}}},
		"ref: key of 254":                  {New: cos(withPhase(b.Ref("s", "", long(254)))), Want: []Cause{Skipped, {"spec.phases[0].objects[0].ref.key", "Too long: may not be more than 253 bytes"}}},
		"deadline: 9":                      {New: cos(b.WithProgressDeadline(9)), Want: []Cause{{"spec.progressDeadlineMinutes", "Invalid value: 9: spec.progressDeadlineMinutes in body should be greater than or equal to 10"}}},
		"deadline: 721":                    {New: cos(b.WithProgressDeadline(721)), Want: []Cause{{"spec.progressDeadlineMinutes", "Invalid value: 721: spec.progressDeadlineMinutes in body should be less than or equal to 720"}}},
		"deadline: negative":               {New: cos(b.WithProgressDeadline(-1)), Want: []Cause{{"spec.progressDeadlineMinutes", "Invalid value: -1: spec.progressDeadlineMinutes in body should be greater than or equal to 10"}}},
		"probes: 21": {New: cos(func(c *olmv1.ClusterObjectSet) {
			for range 21 {
				c.Spec.ProgressionProbes = append(c.Spec.ProgressionProbes, gkProbe(condEqual()))
			}
		}), Want: []Cause{Skipped, {"spec.progressionProbes", "Too many: 21: must have at most 20 items"}}},
		"probes: no assertions": {New: cos(b.WithProbes(gkProbe())), Want: []Cause{Skipped, {"spec.progressionProbes[0].assertions", "Required value"}}},
		"probes: 21 assertions": {New: cos(b.WithProbes(gkProbe(func() []olmv1.Assertion {
			var a []olmv1.Assertion
			for range 21 {
				a = append(a, condEqual())
			}
			return a
		}()...))), Want: []Cause{Skipped, {"spec.progressionProbes[0].assertions", "Too many: 21: must have at most 20 items"}}},
		"probes: unknown selector type":          {New: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: "Name"}, Assertions: []olmv1.Assertion{condEqual()}})), Want: []Cause{Skipped, {"spec.progressionProbes[0].selector.type", "Unsupported value: \"Name\": supported values: \"GroupKind\", \"Label\""}}},
		"probes: GroupKind without groupKind":    {New: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind}, Assertions: []olmv1.Assertion{condEqual()}})), Want: []Cause{{"spec.progressionProbes[0].selector", "Invalid value: groupKind is required when type is GroupKind, and forbidden otherwise"}}},
		"probes: GroupKind with label":           {New: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Kind: "Pod"}, Label: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}, Assertions: []olmv1.Assertion{condEqual()}})), Want: []Cause{{"spec.progressionProbes[0].selector", "Invalid value: label is required when type is Label, and forbidden otherwise"}}},
		"probes: Label without label":            {New: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel}, Assertions: []olmv1.Assertion{condEqual()}})), Want: []Cause{{"spec.progressionProbes[0].selector", "Invalid value: label is required when type is Label, and forbidden otherwise"}}},
		"probes: Label with groupKind":           {New: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, GroupKind: metav1.GroupKind{Kind: "Pod"}, Label: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}, Assertions: []olmv1.Assertion{condEqual()}})), Want: []Cause{{"spec.progressionProbes[0].selector", "Invalid value: groupKind is required when type is GroupKind, and forbidden otherwise"}}},
		"probes: label with both forms":          {New: cos(b.WithProbes(olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}}}, Assertions: []olmv1.Assertion{condEqual()}})), Want: []Cause{{"spec.progressionProbes[0].selector.label", "Invalid value: exactly one of matchLabels or matchExpressions must be set"}}},
		"probes: unknown assertion type":         {New: cos(b.WithProbes(gkProbe(olmv1.Assertion{Type: "Regex"}))), Want: []Cause{Skipped, {"spec.progressionProbes[0].assertions[0].type", "Unsupported value: \"Regex\": supported values: \"ConditionEqual\", \"FieldsEqual\", \"FieldValue\""}}},
		"probes: ConditionEqual without body":    {New: cos(b.WithProbes(gkProbe(olmv1.Assertion{Type: olmv1.AssertionTypeConditionEqual}))), Want: []Cause{{"spec.progressionProbes[0].assertions[0]", "Invalid value: conditionEqual is required when type is ConditionEqual, and forbidden otherwise"}}},
		"probes: ConditionEqual with fieldValue": {New: cos(b.WithProbes(gkProbe(func() olmv1.Assertion { a := condEqual(); a.FieldValue = fieldValue("a").FieldValue; return a }()))), Want: []Cause{{"spec.progressionProbes[0].assertions[0]", "Invalid value: fieldValue is required when type is FieldValue, and forbidden otherwise"}}},
		"probes: FieldsEqual without body":       {New: cos(b.WithProbes(gkProbe(olmv1.Assertion{Type: olmv1.AssertionTypeFieldsEqual}))), Want: []Cause{{"spec.progressionProbes[0].assertions[0]", "Invalid value: fieldsEqual is required when type is FieldsEqual, and forbidden otherwise"}}},
		"probes: FieldValue without body":        {New: cos(b.WithProbes(gkProbe(olmv1.Assertion{Type: olmv1.AssertionTypeFieldValue}))), Want: []Cause{{"spec.progressionProbes[0].assertions[0]", "Invalid value: fieldValue is required when type is FieldValue, and forbidden otherwise"}}},
		"probes: condition status Maybe":         {New: cos(b.WithProbes(gkProbe(olmv1.Assertion{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "Maybe"}}))), Want: []Cause{Skipped, {"spec.progressionProbes[0].assertions[0].conditionEqual.status", "Unsupported value: \"Maybe\": supported values: \"True\", \"False\""}}},
		"probes: field path with two dots":       {New: cos(b.WithProbes(gkProbe(fieldValue("status..phase")))), Want: []Cause{{"spec.progressionProbes[0].assertions[0].fieldValue.fieldPath", "Invalid value: \"status..phase\": must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character."}}},
		"probes: field path with a slash":        {New: cos(b.WithProbes(gkProbe(fieldsEqual("spec/replicas", "status.readyReplicas")))), Want: []Cause{{"spec.progressionProbes[0].assertions[0].fieldsEqual.fieldA", "Invalid value: \"spec/replicas\": must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character."}}},
		"probes: fieldB with a trailing dot":     {New: cos(b.WithProbes(gkProbe(fieldsEqual("spec.replicas", "status.")))), Want: []Cause{{"spec.progressionProbes[0].assertions[0].fieldsEqual.fieldB", "Invalid value: \"status.\": must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character."}}},
		"probes: field value of 201":             {New: cos(b.WithProbes(gkProbe(olmv1.Assertion{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: "status.phase", Value: long(201)}}))), Want: []Cause{Skipped, {"spec.progressionProbes[0].assertions[0].fieldValue.value", "Too long: may not be more than 200 bytes"}}},

		// Updates.
		"update: lifecycle Active to Archived": {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.LifecycleState = olmv1.LifecycleStateArchived })},
		"update: deadline and probes change": {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.ProgressDeadlineMinutes = 30
			c.Spec.ProgressionProbes = []olmv1.ProgressionProbe{gkProbe(condEqual())}
		})},
		"update: labels change":                {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Labels = map[string]string{"a": "b"} })},
		"update: empty phases filled once":     {Old: cos(), New: cos(withPhase(cm("a")))},
		"update: revision changes":             {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Revision = 2 }), Want: []Cause{{"spec.revision", "Invalid value: 2: revision is immutable"}}},
		"update: collision protection changes": {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.CollisionProtection = olmv1.CollisionProtectionNone }), Want: []Cause{{"spec.collisionProtection", "Invalid value: \"None\": collisionProtection is immutable"}}},
		"update: phase object changes":         {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[0].Objects[0] = cm("other") }), Want: []Cause{{"spec.phases", "Invalid value: phases is immutable"}}},
		"update: phase added": {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) {
			c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: "later", Objects: []olmv1.ClusterObjectSetObject{cm("b")}})
		}), Want: []Cause{{"spec.phases", "Invalid value: phases is immutable"}}},
		"update: phases emptied":                 {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases = nil }), Want: []Cause{{"spec", "Invalid value: phases is immutable"}}},
		"update: ref becomes inline":             {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[0].Objects[1] = cm("b") }), Want: []Cause{{"spec.phases", "Invalid value: phases is immutable"}}},
		"update: phase collision protection set": {Old: base, New: mutate(base, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases[0].CollisionProtection = olmv1.CollisionProtectionNone }), Want: []Cause{{"spec.phases", "Invalid value: phases is immutable"}}},
		"update: Archived to Active":             {Old: cos(b.WithLifecycleState(olmv1.LifecycleStateArchived)), New: cos(), Want: []Cause{{"spec.lifecycleState", "Invalid value: \"Active\": cannot un-archive"}}},
	}
}
