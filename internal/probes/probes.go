// Package probes decides whether an object of a ClusterObjectSet phase is ready: the built-in
// readiness probe of its kind plus the custom progression probes whose selectors match it. It is pure:
// no client, no I/O.
//
// Objects may come from Secrets whose content must never appear in conditions, events or logs, so a
// Result's Message names only the object's kind and namespace/name, condition types, field paths and
// generation numbers: never a value read from the object.
package probes

import (
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Result of probing one object.
type Result struct {
	Ready bool
	// Message says what is not yet true, e.g. `Deployment argocd/argocd-server: condition Available is
	// not True` or `... : status has not observed generation 3`; several problems are joined with "; ".
	// It is empty when Ready. It never includes field values taken from the object.
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
// Built-in probes:
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
// Evaluate does not modify obj or custom.
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
	type applying struct {
		index   int
		invalid string // why the selector cannot be evaluated
	}
	var apply []applying
	for i := range custom {
		if ok, invalid := c.selects(custom[i].Selector, group, kind); ok {
			apply = append(apply, applying{i, invalid})
		}
	}
	if builtin == nil && len(apply) == 0 {
		return Result{Ready: true}
	}

	c.gen, _ = asInt64(c.field("metadata.generation"))
	if c.observedGenerationProblem() {
		return c.result(kind)
	}
	if builtin != nil {
		builtin(&c)
	}
	for _, a := range apply {
		if a.invalid != "" {
			c.prefix = fmt.Sprintf("progressionProbes[%d].selector: ", a.index)
			c.addf("%s", a.invalid)
		} else {
			for j, as := range custom[a.index].Assertions {
				c.prefix = fmt.Sprintf("progressionProbes[%d].assertions[%d]: ", a.index, j)
				c.assert(as)
			}
		}
		c.prefix = ""
	}
	return c.result(kind)
}

// checker collects the problems of one object.
type checker struct {
	o        map[string]any
	gen      int64 // metadata.generation; 0 when unset or invalid
	prefix   string
	problems []string
}

func (c *checker) addf(format string, args ...any) {
	c.problems = append(c.problems, c.prefix+fmt.Sprintf(format, args...))
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

func (c *checker) result(kind string) Result {
	if len(c.problems) == 0 {
		return Result{Ready: true}
	}
	if kind == "" {
		kind = "object"
	}
	id := c.str("metadata.name")
	if ns := c.str("metadata.namespace"); ns != "" {
		id = ns + "/" + id
	}
	return Result{Message: kind + " " + id + ": " + strings.Join(c.problems, "; ")}
}

// observedGenerationProblem records, and reports, that status.observedGeneration lags (or is ahead
// of) metadata.generation.
func (c *checker) observedGenerationProblem() bool {
	if c.gen <= 0 {
		return false
	}
	v, found := lookup(c.o, "status.observedGeneration")
	if !found {
		return false
	}
	if n, ok := asInt64(v); !ok || n != c.gen {
		c.addf("status has not observed generation %d", c.gen)
		return true
	}
	return false
}

// findCondition returns the first status.conditions entry of the type.
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

// condition checks that the condition of the type has the status and has observed the generation.
func (c *checker) condition(ctype, want string) {
	cond, ok := c.findCondition(ctype)
	if !ok {
		c.addf("condition %s is missing", ctype)
		return
	}
	if og, found := cond["observedGeneration"]; found && og != nil && c.gen > 0 {
		if n, ok := asInt64(og); !ok || n < c.gen {
			c.addf("condition %s has not observed generation %d", ctype, c.gen)
			return
		}
	}
	if s, _ := cond["status"].(string); s != want {
		c.addf("condition %s is not %s", ctype, want)
	}
}

// phase checks that status.phase is the string want.
func (c *checker) phase(want string) {
	v, found := lookup(c.o, "status.phase")
	if !found {
		c.addf("status.phase is missing")
		return
	}
	if s, _ := v.(string); s != want {
		c.addf("status.phase is not %s", want)
	}
}

// integer returns the integer at path, def when missing; ok is false (and a problem recorded) when the
// field holds something else.
func (c *checker) integer(path string, def int64) (n int64, ok bool) {
	v, found := lookup(c.o, path)
	if !found {
		return def, true
	}
	if n, ok = asInt64(v); !ok {
		c.addf("%s is not an integer", path)
	}
	return n, ok
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
func (c *checker) workload(statefulSet bool) {
	want, okWant := c.integer("spec.replicas", 1)
	replicas, okReplicas := c.integer("status.replicas", 0)
	updated, okUpdated := c.integer("status.updatedReplicas", 0)
	if okReplicas && okUpdated && updated != replicas {
		c.addf("status.updatedReplicas does not equal status.replicas")
	}
	if okReplicas && okWant && replicas != want {
		c.addf("status.replicas does not equal spec.replicas")
	}
	if _, has := c.findCondition("Available"); statefulSet && !has {
		if available, ok := c.integer("status.availableReplicas", 0); ok && okWant && available != want {
			c.addf("status.availableReplicas does not equal spec.replicas")
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
		return true, "unsupported selector type"
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

func (c *checker) assert(a olmv1.Assertion) {
	switch a.Type {
	case olmv1.AssertionTypeConditionEqual:
		c.condition(a.ConditionEqual.Type, a.ConditionEqual.Status)
	case olmv1.AssertionTypeFieldsEqual:
		va, okA := lookup(c.o, a.FieldsEqual.FieldA)
		vb, okB := lookup(c.o, a.FieldsEqual.FieldB)
		if !okA {
			c.addf("field %s is missing", a.FieldsEqual.FieldA)
		}
		if !okB {
			c.addf("field %s is missing", a.FieldsEqual.FieldB)
		}
		if okA && okB && !reflect.DeepEqual(normalize(va), normalize(vb)) {
			c.addf("fields %s and %s are not equal", a.FieldsEqual.FieldA, a.FieldsEqual.FieldB)
		}
	case olmv1.AssertionTypeFieldValue:
		v, found := lookup(c.o, a.FieldValue.FieldPath)
		if !found {
			c.addf("field %s is missing", a.FieldValue.FieldPath)
			return
		}
		if s, ok := render(v); !ok || s != a.FieldValue.Value {
			c.addf("field %s does not have the expected value", a.FieldValue.FieldPath)
		}
	default:
		c.addf("unsupported assertion type")
	}
}
