// Package probes decides whether an object of a ClusterObjectSet phase is ready: the built-in
// readiness probe of its kind plus the custom progression probes whose selectors match it. It is pure:
// no client, no I/O.
//
// Messages read like those of upstream (operator-controller's Available=False/ProbeFailure message,
// made of the boxcutter probing library's probe messages):
//
//	Object <Kind>.<groupVersion> <namespace>/<name>: <message> and <message>...
//
// for example `Object Deployment.apps/v1 shop/web: .status.condition["Available"] is not True` or
// `Object Namespace.v1 /shop: missing key: "status.phase"` (a cluster-scoped object has an empty
// namespace). Objects may come from Secrets whose content must never appear in conditions, events or
// logs, so where upstream's messages echo a value observed on the object (a condition's status, the
// value found at a key, both sides of an inequality, the type named by a lookup error) ours leave it
// out. A message names only the object's kind, apiVersion, namespace and name, plus what the probe
// itself says: field paths, condition types, the expected status or value, and probe positions.
package probes

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Result of probing one object.
type Result struct {
	Ready bool
	// Message says what is not yet true; it is empty when Ready. It reads
	// `Object <Kind>.<groupVersion> <namespace>/<name>: <m1> and <m2>...` (upstream's format; the
	// namespace is empty for a cluster-scoped object, the groupVersion is `v1` for the core group),
	// where each message is one of:
	//
	//	.status outdated                                     status.observedGeneration != metadata.generation
	//	missing .status.conditions                           no status.conditions
	//	malformed .status.conditions                         status.conditions is not a list
	//	missing .status.condition["<Type>"]                  no condition of the type
	//	.status.condition["<Type>"] outdated                 the condition's observedGeneration < generation
	//	.status.condition["<Type>"] is not <Status>          it has another status (the expected one is named)
	//	missing key: "<path>"                                FieldValue: nothing (or null) at the path
	//	error locating key "<path>"                          FieldValue: a step of the path is not a map
	//	value at key "<path>" != "<value>"; expected: <json> FieldValue: another value is there
	//	                                                     (also the Namespace and PVC status.phase probes)
	//	"<fieldA>" missing / "<fieldB>" missing              FieldsEqual: a side is absent (A is checked first)
	//	"<fieldA>" != "<fieldB>"                             FieldsEqual: the values differ
	//	value at key "<path>" is not an integer              a workload's replica count is not an integer
	//	progressionProbes[<i>].selector: ...                 a custom probe's selector cannot be evaluated
	//	progressionProbes[<i>].assertions[<j>]: ...          a custom probe's assertion type is unknown
	//
	// Like boxcutter's probing.And, when any failing check is Unknown (the status was not observed
	// yet: `.status outdated`, and the `missing`, `malformed` and `outdated` condition messages) only
	// the Unknown messages are kept, otherwise the False ones; order is kept and a message repeated by
	// several probes is said once. A custom probe that cannot be evaluated (a selector or assertion
	// problem) hides every other message, as upstream's failing build of the revision does. Observed
	// values never appear, because objects may come from Secrets: upstream's `is <observedStatus>`
	// becomes `is not <expectedStatus>`, and its ` got: <json>`, `expected: <jsonA> got: <jsonB>` and
	// lookup error suffixes are left out.
	Message string
}

// Condition statuses.
const (
	statusTrue = string(metav1.ConditionTrue)
)

// Evaluate runs the built-in readiness probe for the object's kind plus every custom probe whose
// selector matches it. All must pass. Objects with no built-in probe and no matching custom probe are
// ready. A custom probe whose selector is invalid (or of an unknown type) fails for every object.
//
// Generation gating: when at least one probe applies and metadata.generation is set (positive), the
// object is not ready while status.observedGeneration is present and differs from it, and a
// condition whose observedGeneration is lower than it does not count.
//
// Built-in probes (upstream writes them as default progressionProbes):
//   - apiextensions.k8s.io CustomResourceDefinition: condition Established=True
//   - Namespace: status.phase Active; PersistentVolumeClaim: status.phase Bound
//   - apps Deployment: status.updatedReplicas == status.replicas == spec.replicas (status fields
//     default to 0, spec.replicas to 1) and condition Available=True
//   - apps StatefulSet: as Deployment, but without an Available condition (older clusters)
//     status.availableReplicas == spec.replicas instead
//   - cert-manager.io Certificate and Issuer: condition Ready=True
//
// Custom assertions: ConditionEqual (a status.conditions entry of the type has the status),
// FieldsEqual (both dotted paths exist and hold equal values, numbers compared as numbers) and
// FieldValue (the path exists and its scalar value, rendered as a string, equals the value). A
// dotted path is missing when any step is absent, not a map, or null.
//
// See Result for the messages. Evaluate does not modify obj or custom.
func Evaluate(obj *unstructured.Unstructured, custom []olmv1.ProgressionProbe) Result {
	if obj == nil {
		return Result{Message: "no object to probe"}
	}
	c := checker{o: obj.Object}
	if c.o == nil {
		c.o = map[string]any{}
	}
	group, kind := c.groupKind()
	builtin := builtins[builtinKey{group, kind}]

	// Which custom probes apply: their selector matches, or cannot be evaluated (then they fail).
	var apply []int
	for i := range custom {
		applies, invalid := c.selects(custom[i].Selector, group, kind)
		switch {
		case !applies:
			continue
		case invalid != "":
			c.add(specError, fmt.Sprintf("progressionProbes[%d].selector: %s", i, invalid))
		default:
			for j, a := range custom[i].Assertions {
				if !knownAssertion(a.Type) {
					c.add(specError, fmt.Sprintf("progressionProbes[%d].assertions[%d]: unknown assertion type %q", i, j, a.Type))
				}
			}
			apply = append(apply, i)
		}
	}
	if len(c.problems) > 0 {
		return c.result()
	}
	if builtin == nil && len(apply) == 0 {
		return Result{Ready: true}
	}

	c.gen, _ = asInt64(c.field("metadata.generation"))
	if c.statusOutdated() {
		// Upstream wraps every progression probe in an ObservedGenerationProbe, so each says this
		// (and nothing else); it is said once here.
		c.add(unknown, ".status outdated")
		return c.result()
	}
	if builtin != nil {
		builtin(&c)
	}
	for _, i := range apply {
		for _, a := range custom[i].Assertions {
			c.assert(a)
		}
	}
	return c.result()
}

// NeedsContent reports whether Evaluate reads obj beyond its apiVersion, kind and labels: a built-in
// probe of its kind, or a custom probe whose selector matches it or cannot be evaluated. When it is
// false, Evaluate finds obj ready whatever else it holds, so a caller may probe an object it knows by
// its metadata alone.
func NeedsContent(obj *unstructured.Unstructured, custom []olmv1.ProgressionProbe) bool {
	if obj == nil || obj.Object == nil {
		return true
	}
	c := checker{o: obj.Object}
	group, kind := c.groupKind()
	if builtins[builtinKey{group, kind}] != nil {
		return true
	}
	for i := range custom {
		if applies, _ := c.selects(custom[i].Selector, group, kind); applies {
			return true
		}
	}
	return false
}

// verdict is the status of a failed check. Upstream's probes say False or Unknown; a custom probe that
// cannot be evaluated is a specError, which upstream reports instead of any probe result.
type verdict int

const (
	// fail: the check ran and failed (upstream's False).
	fail verdict = iota
	// unknown: what the check reads has not been observed yet (upstream's Unknown).
	unknown
	// specError: a custom probe cannot be evaluated.
	specError
)

type problem struct {
	verdict verdict
	message string
}

// checker collects the problems of one object.
type checker struct {
	o        map[string]any
	gen      int64 // metadata.generation; 0 when unset or invalid
	problems []problem
}

func (c *checker) add(v verdict, message string) {
	c.problems = append(c.problems, problem{v, message})
}

func (c *checker) field(path string) any {
	v, _ := lookup(c.o, path)
	return v
}

func (c *checker) str(path string) string {
	s, _ := c.field(path).(string)
	return s
}

func (c *checker) groupKind() (group, kind string) {
	group, _, found := strings.Cut(c.str("apiVersion"), "/")
	if !found {
		group = "" // core: "v1"
	}
	return group, c.str("kind")
}

// identity is Identity of the object probed.
func (c *checker) identity() string { return Identity(c.o) }

// Identity names an object as upstream's status messages do: `Object <Kind>.<groupVersion>
// <namespace>/<name>` (cluster-scoped: `/<name>`); the groupVersion is schema.GroupVersion.String()
// of the apiVersion (the apiVersion as it is when it does not parse). Only identity, never content.
func Identity(obj map[string]any) string {
	str := func(path ...string) string { v, _, _ := unstructured.NestedString(obj, path...); return v }
	gv := str("apiVersion")
	if parsed, err := schema.ParseGroupVersion(gv); err == nil {
		gv = parsed.String()
	}
	return fmt.Sprintf("Object %s.%s %s/%s", str("kind"), gv, str("metadata", "namespace"), str("metadata", "name"))
}

// result combines the problems like boxcutter's probing.And: only those of the most severe verdict
// are kept (specError, then unknown, then fail), in order, each message once, joined with " and ".
func (c *checker) result() Result {
	if len(c.problems) == 0 {
		return Result{Ready: true}
	}
	top := fail
	for _, p := range c.problems {
		top = max(top, p.verdict)
	}
	var msgs []string
	seen := map[string]bool{}
	for _, p := range c.problems {
		if p.verdict == top && !seen[p.message] {
			seen[p.message] = true
			msgs = append(msgs, p.message)
		}
	}
	return Result{Message: c.identity() + ": " + strings.Join(msgs, " and ")}
}

// statusOutdated reports whether status.observedGeneration differs from metadata.generation
// (lags, is ahead of it, or is not an integer).
func (c *checker) statusOutdated() bool {
	if c.gen <= 0 {
		return false
	}
	v, found := lookup(c.o, "status.observedGeneration")
	if !found {
		return false
	}
	n, ok := asInt64(v)
	return !ok || n != c.gen
}

// findCondition returns the first status.conditions entry of the type. Entries that are not maps, or
// whose type is not a string, are skipped.
func (c *checker) findCondition(ctype string) (map[string]any, bool) {
	list, _ := c.field("status.conditions").([]any)
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if t, _ := m["type"].(string); t == ctype {
			return m, true
		}
	}
	return nil, false
}

// condition checks that the condition of the type has the status and has observed the generation
// (upstream's ConditionProbe, without the observed status in the message).
func (c *checker) condition(ctype, want string) {
	v, found := lookup(c.o, "status.conditions")
	if !found {
		c.add(unknown, "missing .status.conditions")
		return
	}
	if _, ok := v.([]any); !ok {
		c.add(unknown, "malformed .status.conditions")
		return
	}
	cond, ok := c.findCondition(ctype)
	if !ok {
		c.add(unknown, fmt.Sprintf(`missing .status.condition["%s"]`, ctype))
		return
	}
	if og, found := cond["observedGeneration"]; found && og != nil && c.gen > 0 {
		if n, ok := asInt64(og); !ok || n < c.gen {
			c.add(unknown, fmt.Sprintf(`.status.condition["%s"] outdated`, ctype))
			return
		}
	}
	if s, _ := cond["status"].(string); s != want {
		c.add(fail, fmt.Sprintf(`.status.condition["%s"] is not %s`, ctype, want))
	}
}

// fieldValue checks that the value at path matches (upstream's FieldValueProbe, without the value
// found, nor the lookup error that names its type, in the message). want is the expected value as the
// probe states it.
func (c *checker) fieldValue(path, want string, matches func(any) bool) {
	v, where := locate(c.o, path)
	switch where {
	case blocked:
		c.add(fail, fmt.Sprintf("error locating key %q", path))
	case missing:
		c.add(fail, fmt.Sprintf("missing key: %q", path))
	default:
		if !matches(v) {
			expected, err := json.Marshal(want)
			if err != nil {
				expected = []byte("<value marshal failed>")
			}
			c.add(fail, fmt.Sprintf("value at key %q != %q; expected: %s", path, want, expected))
		}
	}
}

// phase checks that status.phase is the string want.
func (c *checker) phase(want string) {
	c.fieldValue("status.phase", want, func(v any) bool {
		s, ok := v.(string)
		return ok && s == want
	})
}

// integer returns the integer at path, def when missing; ok is false (and a problem recorded) when the
// field holds something else.
func (c *checker) integer(path string, def int64) (n int64, ok bool) {
	v, found := lookup(c.o, path)
	if !found {
		return def, true
	}
	if n, ok = asInt64(v); !ok {
		c.add(fail, fmt.Sprintf("value at key %q is not an integer", path))
	}
	return n, ok
}

// notEqual records that two fields differ, as upstream's FieldsEqualProbe says it (without the
// values).
func (c *checker) notEqual(fieldA, fieldB string) {
	c.add(fail, fmt.Sprintf(`"%s" != "%s"`, fieldA, fieldB))
}

type builtinKey struct{ group, kind string }

var builtins = map[builtinKey]func(*checker){
	{"apiextensions.k8s.io", "CustomResourceDefinition"}: func(c *checker) { c.condition("Established", statusTrue) },
	{"", "Namespace"}:                  func(c *checker) { c.phase("Active") },
	{"", "PersistentVolumeClaim"}:      func(c *checker) { c.phase("Bound") },
	{"apps", "Deployment"}:             func(c *checker) { c.workload(false) },
	{"apps", "StatefulSet"}:            func(c *checker) { c.workload(true) },
	{"cert-manager.io", "Certificate"}: func(c *checker) { c.condition("Ready", statusTrue) },
	{"cert-manager.io", "Issuer"}:      func(c *checker) { c.condition("Ready", statusTrue) },
}

// workload is the Deployment and StatefulSet probe. A StatefulSet without an Available condition
// (clusters before it was added) is available when status.availableReplicas == spec.replicas.
// Upstream's probe is FieldsEqual status.updatedReplicas/status.replicas then the Available condition;
// here absent status counters count as 0, and status.replicas must also equal spec.replicas.
func (c *checker) workload(statefulSet bool) {
	want, okWant := c.integer("spec.replicas", 1)
	replicas, okReplicas := c.integer("status.replicas", 0)
	updated, okUpdated := c.integer("status.updatedReplicas", 0)
	if okReplicas && okUpdated && updated != replicas {
		c.notEqual("status.updatedReplicas", "status.replicas")
	}
	if okReplicas && okWant && replicas != want {
		c.notEqual("status.replicas", "spec.replicas")
	}
	if _, has := c.findCondition("Available"); statefulSet && !has {
		if available, ok := c.integer("status.availableReplicas", 0); ok && okWant && available != want {
			c.notEqual("status.availableReplicas", "spec.replicas")
		}
		return
	}
	c.condition("Available", statusTrue)
}

// selects reports whether a custom probe applies to the object. A selector that cannot be evaluated
// applies, and invalid says why, so the probe fails.
func (c *checker) selects(sel olmv1.ObjectSelector, group, kind string) (applies bool, invalid string) {
	switch sel.Type {
	case olmv1.SelectorTypeGroupKind:
		return sel.GroupKind.Group == group && sel.GroupKind.Kind == kind, ""
	case olmv1.SelectorTypeLabel:
		s, err := metav1.LabelSelectorAsSelector(&sel.Label)
		if err != nil {
			// The error names the selector's own keys, operators and values (the probe's spec, not
			// the object's content).
			return true, "invalid label selector: " + err.Error()
		}
		return s.Matches(labels.Set(c.labels())), ""
	default:
		return true, fmt.Sprintf("unknown selector type %q", sel.Type)
	}
}

// labels returns metadata.labels, ignoring entries that are not strings.
func (c *checker) labels() map[string]string {
	m, _ := c.field("metadata.labels").(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func knownAssertion(t olmv1.AssertionType) bool {
	switch t {
	case olmv1.AssertionTypeConditionEqual, olmv1.AssertionTypeFieldsEqual, olmv1.AssertionTypeFieldValue:
		return true
	default:
		return false
	}
}

// assert runs one custom assertion of a known type.
func (c *checker) assert(a olmv1.Assertion) {
	switch a.Type {
	case olmv1.AssertionTypeConditionEqual:
		c.condition(a.ConditionEqual.Type, a.ConditionEqual.Status)
	case olmv1.AssertionTypeFieldsEqual:
		fieldA, fieldB := a.FieldsEqual.FieldA, a.FieldsEqual.FieldB
		va, okA := lookup(c.o, fieldA)
		vb, okB := lookup(c.o, fieldB)
		switch {
		case !okA:
			c.add(fail, fmt.Sprintf(`"%s" missing`, fieldA))
		case !okB:
			c.add(fail, fmt.Sprintf(`"%s" missing`, fieldB))
		case !reflect.DeepEqual(normalize(va), normalize(vb)):
			c.notEqual(fieldA, fieldB)
		}
	case olmv1.AssertionTypeFieldValue:
		want := a.FieldValue.Value
		c.fieldValue(a.FieldValue.FieldPath, want, func(v any) bool {
			s, ok := render(v)
			return ok && s == want
		})
	}
}
