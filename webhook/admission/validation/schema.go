package validation

import (
	"regexp"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// schema is one node of the CRD's structural schema, written out by hand: the subset of OpenAPI the
// ClusterObjectSet CRD uses, plus its Kubernetes extensions. TestSchemaMatchesCRD checks that this
// table and config/crd/bases agree, so a regenerated CRD cannot drift from the validator unnoticed.
type schema struct {
	Type                 string // object, array, string or integer
	Format               string
	Properties           map[string]*schema
	AdditionalProperties *schema
	Required             []string
	Items                *schema
	Enum                 []string
	MinLength, MaxLength *int64
	Minimum, Maximum     *int64
	MinItems, MaxItems   *int64
	ListType             string   // x-kubernetes-list-type
	ListMapKeys          []string // x-kubernetes-list-map-keys
	MapType              string   // x-kubernetes-map-type
	Embedded             bool     // x-kubernetes-embedded-resource
	PreserveUnknown      bool     // x-kubernetes-preserve-unknown-fields
	Rules                []rule   // x-kubernetes-validations
}

// walk calls visit on v and on every value below it that s describes (a property, a value of a map,
// an item of a list), each before the values below it, the keys of a map in order, and returns the
// errors of all the calls in that order. visit may change a map before walk reads its keys.
func walk(p *field.Path, v any, s *schema, visit func(*field.Path, any, *schema) field.ErrorList) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := visit(p, v, s)
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if ps, ok := s.Properties[k]; ok {
				errs = append(errs, walk(p.Child(k), x[k], ps, visit)...)
			} else if s.AdditionalProperties != nil {
				errs = append(errs, walk(p.Key(k), x[k], s.AdditionalProperties, visit)...)
			}
		}
	case []any:
		for i, item := range x {
			errs = append(errs, walk(p.Index(i), item, s.Items, visit)...)
		}
	}
	return errs
}

// rule is one x-kubernetes-validations entry: the CEL source and message as in the CRD, and a Go
// function that evaluates the same expression over the JSON form of the value.
type rule struct {
	Rule    string
	Message string
	// Transition is true when the rule uses oldSelf: it runs only on update, when the node has an old
	// value, and its errors are never ratcheted.
	Transition bool
	// Holds evaluates the rule. old is the old value for transition rules, nil otherwise.
	Holds func(self, old any) bool
	// Reads are the fields of self the rule reads without has(): when one is absent, CEL fails to
	// evaluate the rule ("no such key"). Only an old object stored under a laxer CRD gets there (the
	// schema requires them, and the CEL stage is skipped after a Required error), on an update that
	// ratchets the Required error away.
	Reads []string
}

func i64(v int64) *int64 { return &v }

var (
	collisionProtectionValues = []string{"Prevent", "IfNoController", "None"}
	fieldPathRegexp           = regexp.MustCompile(`^[a-zA-Z0-9]+(?:\.[a-zA-Z0-9]+)*$`)
)

const (
	fieldPathRule = `self.matches('^[a-zA-Z0-9]+(?:\\.[a-zA-Z0-9]+)*$')`
	fieldPathMsg  = `must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the "." character.`
	dnsLabelRule  = `!format.dns1123Label().validate(self).hasValue()`
	dnsLabelMsg   = "the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."
)

// specSchema is the schema of .spec of the CRD. The root (apiVersion, kind, metadata) holds no
// constraints of the CRD's own, and .status is not validated (see the package documentation).
var specSchema = buildSpecSchema()

func str() *schema { return &schema{Type: "string"} }

func enum(values ...string) *schema { return &schema{Type: "string", Enum: values} }

func boundedString(minLength, maxLength int64) *schema {
	s := &schema{Type: "string", MaxLength: i64(maxLength)}
	if minLength > 0 {
		s.MinLength = i64(minLength)
	}
	return s
}

func fieldPath() *schema {
	s := boundedString(1, 200)
	s.Rules = []rule{{Rule: fieldPathRule, Message: fieldPathMsg, Holds: func(self, _ any) bool {
		v, ok := self.(string)
		return ok && fieldPathRegexp.MatchString(v)
	}}}
	return s
}

// unionRule is the rule of a discriminated union member: set exactly when the discriminator, `type`
// in every union of the API, names it.
func unionRule(value, member string) rule {
	const discriminator = "type"
	return rule{
		Rule:    "self." + discriminator + " == '" + value + "' ? has(self." + member + ") : !has(self." + member + ")",
		Message: member + " is required when type is " + value + ", and forbidden otherwise",
		Holds: func(self, _ any) bool {
			return (prop(self, discriminator) == value) == has(self, member)
		},
		Reads: []string{discriminator},
	}
}

// buildSpecSchema is the schema of .spec: its immutable fields and transition rules, over the
// schemas of a phase and of a progression probe.
func buildSpecSchema() *schema {
	return &schema{
		Type:     "object",
		Required: []string{"collisionProtection", "lifecycleState", "revision"},
		Properties: map[string]*schema{
			"collisionProtection": {
				Type: "string", Enum: collisionProtectionValues,
				Rules: []rule{{Rule: "self == oldSelf", Message: "collisionProtection is immutable", Transition: true, Holds: celEqualScalars}},
			},
			"lifecycleState": {
				Type: "string", Enum: []string{"Active", "Archived"},
				Rules: []rule{{
					Rule:       "oldSelf == 'Active' || oldSelf == 'Archived' && oldSelf == self",
					Message:    "cannot un-archive",
					Transition: true,
					Holds: func(self, old any) bool {
						return old == "Active" || old == "Archived" && celEqualScalars(old, self)
					},
				}},
			},
			"phases": {
				Type:        "array",
				MaxItems:    i64(20),
				ListType:    "map",
				ListMapKeys: []string{"name"},
				Items:       phaseSchema(),
				Rules: []rule{{
					Rule:       "self == oldSelf || oldSelf.size() == 0",
					Message:    "phases is immutable",
					Transition: true,
					// Holds is set below: it needs the phases schema itself for CEL equality.
				}},
			},
			"progressDeadlineMinutes": {Type: "integer", Format: "int32", Minimum: i64(10), Maximum: i64(720)},
			"progressionProbes":       {Type: "array", ListType: "atomic", MinItems: i64(1), MaxItems: i64(20), Items: probeSchema()},
			"revision": {
				Type: "integer", Format: "int64", Minimum: i64(1),
				Rules: []rule{{Rule: "self == oldSelf", Message: "revision is immutable", Transition: true, Holds: celEqualScalars}},
			},
		},
		Rules: []rule{{
			Rule:       "has(self.phases) || !has(oldSelf.phases) || size(oldSelf.phases) == 0",
			Message:    "phases is immutable",
			Transition: true,
			Holds: func(self, old any) bool {
				return has(self, "phases") || !has(old, "phases") || listLen(prop(old, "phases")) == 0
			},
		}},
	}
}

// phaseSchema is the schema of a phase: its name and objects, each inline or a ref.
func phaseSchema() *schema {
	return &schema{
		Type:     "object",
		Required: []string{"name", "objects"},
		Properties: map[string]*schema{
			"name": func() *schema {
				s := boundedString(1, 63)
				s.Rules = []rule{{Rule: dnsLabelRule, Message: dnsLabelMsg, Holds: func(self, _ any) bool {
					v, ok := self.(string)
					return ok && len(apivalidation.NameIsDNSLabel(v, false)) == 0
				}}}
				return s
			}(),
			"collisionProtection": enum(collisionProtectionValues...),
			"objects": {
				Type:     "array",
				MaxItems: i64(50),
				Items: &schema{
					Type: "object",
					Properties: map[string]*schema{
						"collisionProtection": enum(collisionProtectionValues...),
						"object":              {Type: "object", Embedded: true, PreserveUnknown: true},
						"ref": {
							Type:     "object",
							Required: []string{"key", "name"},
							Properties: map[string]*schema{
								"key":       boundedString(1, 253),
								"name":      boundedString(1, 253),
								"namespace": boundedString(0, 63),
							},
						},
					},
					Rules: []rule{{
						Rule:    "(has(self.object)?1:0)+(has(self.ref)?1:0) == 1",
						Message: "exactly one of the fields in [object ref] must be set",
						Holds: func(self, _ any) bool {
							n := 0
							if has(self, "object") {
								n++
							}
							if has(self, "ref") {
								n++
							}
							return n == 1
						},
					}},
				},
			},
		},
	}
}

// labelSelectorSchema is the schema of a probe's label selector.
func labelSelectorSchema() *schema {
	return &schema{
		Type:    "object",
		MapType: "atomic",
		Properties: map[string]*schema{
			"matchExpressions": {
				Type:     "array",
				ListType: "atomic",
				Items: &schema{
					Type:     "object",
					Required: []string{"key", "operator"},
					Properties: map[string]*schema{
						"key":      str(),
						"operator": str(),
						"values":   {Type: "array", ListType: "atomic", Items: str()},
					},
				},
			},
			"matchLabels": {Type: "object", AdditionalProperties: str()},
		},
		Rules: []rule{{
			Rule:    "(has(self.matchExpressions) && !has(self.matchLabels)) || (!has(self.matchExpressions) && has(self.matchLabels))",
			Message: "exactly one of matchLabels or matchExpressions must be set",
			Holds: func(self, _ any) bool {
				return has(self, "matchExpressions") != has(self, "matchLabels")
			},
		}},
	}
}

// assertionSchema is the schema of a probe's assertion, a union on its type.
func assertionSchema() *schema {
	return &schema{
		Type:     "object",
		Required: []string{"type"},
		Properties: map[string]*schema{
			"type": enum("ConditionEqual", "FieldsEqual", "FieldValue"),
			"conditionEqual": {
				Type:     "object",
				Required: []string{"status", "type"},
				Properties: map[string]*schema{
					"status": enum("True", "False"),
					"type":   boundedString(1, 200),
				},
			},
			"fieldsEqual": {
				Type:       "object",
				Required:   []string{"fieldA", "fieldB"},
				Properties: map[string]*schema{"fieldA": fieldPath(), "fieldB": fieldPath()},
			},
			"fieldValue": {
				Type:       "object",
				Required:   []string{"fieldPath", "value"},
				Properties: map[string]*schema{"fieldPath": fieldPath(), "value": boundedString(1, 200)},
			},
		},
		Rules: []rule{
			unionRule("ConditionEqual", "conditionEqual"),
			unionRule("FieldsEqual", "fieldsEqual"),
			unionRule("FieldValue", "fieldValue"),
		},
	}
}

// probeSchema is the schema of a progression probe: its selector and assertions.
func probeSchema() *schema {
	return &schema{
		Type:     "object",
		Required: []string{"assertions", "selector"},
		Properties: map[string]*schema{
			"assertions": {Type: "array", ListType: "atomic", MinItems: i64(1), MaxItems: i64(20), Items: assertionSchema()},
			"selector": {
				Type:     "object",
				Required: []string{"type"},
				Properties: map[string]*schema{
					"type": enum("GroupKind", "Label"),
					"groupKind": {
						Type:       "object",
						Required:   []string{"group", "kind"},
						Properties: map[string]*schema{"group": str(), "kind": str()},
					},
					"label": labelSelectorSchema(),
				},
				Rules: []rule{
					unionRule("GroupKind", "groupKind"),
					unionRule("Label", "label"),
				},
			},
		},
	}
}

func init() {
	phases := specSchema.Properties["phases"]
	phases.Rules[0].Holds = func(self, old any) bool {
		return celEqual(self, old, phases) || listLen(old) == 0
	}
}

// has is CEL's has(x.f) on an object with declared properties: f is present and not null.
func has(obj any, name string) bool {
	m, ok := obj.(map[string]any)
	if !ok {
		return false
	}
	v, ok := m[name]
	return ok && v != nil
}

// prop returns x.f, or nil when x is not an object or has no f.
func prop(obj any, name string) any {
	m, _ := obj.(map[string]any)
	return m[name]
}

func listLen(v any) int {
	l, _ := v.([]any)
	return len(l)
}
