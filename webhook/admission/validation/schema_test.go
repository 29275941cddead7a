package validation

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// TestSchemaMatchesCRD compares the hand-written schema (specSchema) with the generated CRD's
// openAPIV3Schema, both ways: every constraint one of them has and the other lacks is reported with
// its field path, so a regenerated CRD (a new enum value, a new rule, a changed bound) cannot drift
// from the validator unnoticed. The other cases mutate a copy of the CRD and check that the
// comparison reports the change. What the rules' Go functions compute is not checked here: the
// oracle does that (oracle_test.go).
func TestSchemaMatchesCRD(t *testing.T) {
	cases := map[string]struct {
		mutate func(spec *apiextensionsv1.JSONSchemaProps, root *apiextensionsv1.JSONSchemaProps)
		want   []string
	}{
		"the generated CRD": {},
		"a new enum value": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				p := spec.Properties["collisionProtection"]
				p.Enum = append(slices.Clone(p.Enum), apiextensionsv1.JSON{Raw: []byte(`"Always"`)})
				spec.Properties["collisionProtection"] = p
			},
			want: []string{`spec.collisionProtection: enum: CRD ["Prevent" "IfNoController" "None" "Always"], schema.go ["Prevent" "IfNoController" "None"]`},
		},
		"a new enum value deep down": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				at(spec, "progressionProbes", "[]", "assertions", "[]", "conditionEqual", "status", func(p *apiextensionsv1.JSONSchemaProps) {
					p.Enum = append(slices.Clone(p.Enum), apiextensionsv1.JSON{Raw: []byte(`"Unknown"`)})
				})
			},
			want: []string{`spec.progressionProbes[].assertions[].conditionEqual.status: enum: CRD ["True" "False" "Unknown"], schema.go ["True" "False"]`},
		},
		"a required field": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				spec.Required = append(slices.Clone(spec.Required), "phases")
			},
			want: []string{`spec: required: CRD [collisionProtection lifecycleState phases revision], schema.go [collisionProtection lifecycleState revision]`},
		},
		"a changed maxItems": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				at(spec, "phases", "[]", "objects", func(p *apiextensionsv1.JSONSchemaProps) { p.MaxItems = ptr64(100) })
			},
			want: []string{"spec.phases[].objects: maxItems: CRD 100, schema.go 50"},
		},
		"a pattern, a format and maxProperties": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				at(spec, "phases", "[]", "objects", "[]", "ref", func(p *apiextensionsv1.JSONSchemaProps) {
					p.MaxProperties = ptr64(3)
					key := p.Properties["key"]
					key.Pattern, key.Format = "^[a-z]+$", "hostname"
					p.Properties["key"] = key
				})
			},
			want: []string{
				"spec.phases[].objects[].ref.key: format: CRD hostname, schema.go ",
				"spec.phases[].objects[].ref.key: pattern ^[a-z]+$: not in schema.go",
				"spec.phases[].objects[].ref: maxProperties 3: not in schema.go",
			},
		},
		"a new field": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				spec.Properties["paused"] = apiextensionsv1.JSONSchemaProps{Type: "boolean"}
			},
			want: []string{"spec.paused: in the CRD, not in schema.go"},
		},
		"a removed field": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) { delete(spec.Properties, "progressDeadlineMinutes") },
			want:   []string{"spec.progressDeadlineMinutes: in schema.go, not in the CRD"},
		},
		"a new rule": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				at(spec, "progressDeadlineMinutes", func(p *apiextensionsv1.JSONSchemaProps) {
					p.XValidations = append(p.XValidations, apiextensionsv1.ValidationRule{Rule: "self % 5 == 0", Message: "whole 5 minutes"})
				})
			},
			want: []string{`spec.progressDeadlineMinutes: rules: CRD ["self % 5 == 0" (whole 5 minutes)], schema.go []`},
		},
		"a rule's message changed": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				at(spec, "revision", func(p *apiextensionsv1.JSONSchemaProps) {
					p.XValidations = slices.Clone(p.XValidations)
					p.XValidations[0].Message = "revision cannot change"
				})
			},
			want: []string{`spec.revision: rules: CRD ["self == oldSelf" (revision cannot change)], schema.go ["self == oldSelf" (revision is immutable)]`},
		},
		"a rule with a messageExpression": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				at(spec, "revision", func(p *apiextensionsv1.JSONSchemaProps) {
					p.XValidations = slices.Clone(p.XValidations)
					p.XValidations[0].MessageExpression = "'revision ' + string(self)"
				})
			},
			want: []string{`spec.revision: rule "self == oldSelf": messageExpression, reason, fieldPath or optionalOldSelf: not in schema.go`},
		},
		"a list type changed": {
			mutate: func(spec, _ *apiextensionsv1.JSONSchemaProps) {
				at(spec, "progressionProbes", func(p *apiextensionsv1.JSONSchemaProps) { p.XListType = ptrS("set") })
			},
			want: []string{"spec.progressionProbes: x-kubernetes-list-type: CRD set, schema.go atomic"},
		},
		"a rule on the root": {
			mutate: func(_, root *apiextensionsv1.JSONSchemaProps) {
				root.XValidations = append(root.XValidations, apiextensionsv1.ValidationRule{Rule: "self.metadata.name.size() < 50", Message: "short names"})
			},
			want: []string{`<root>: rules: CRD ["self.metadata.name.size() < 50" (short names)], schema.go []`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd := generatedCRD(t)
			root := crdRoot(t, crd)
			if tc.mutate != nil {
				spec := root.Properties["spec"]
				tc.mutate(&spec, root)
				root.Properties["spec"] = spec
			}
			got := compareRoot(root, specSchema)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("differences between the CRD and schema.go (-want +got):\n%s", diff)
			}
		})
	}
}

// crdRoot returns the openAPIV3Schema of the served version.
func crdRoot(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name == olmv1.GroupVersion.Version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("the CRD has no schema for %s", olmv1.GroupVersion.Version)
	return nil
}

// at changes the node of spec at path: property names, "[]" for the items of an array. The maps
// along the way are copied, so the CRD of other cases is not changed.
func at(spec *apiextensionsv1.JSONSchemaProps, path ...any) {
	change := path[len(path)-1].(func(*apiextensionsv1.JSONSchemaProps))
	var walk func(p *apiextensionsv1.JSONSchemaProps, rest []any)
	walk = func(p *apiextensionsv1.JSONSchemaProps, rest []any) {
		if len(rest) == 1 {
			change(p)
			return
		}
		if rest[0] == "[]" {
			items := *p.Items.Schema
			walk(&items, rest[1:])
			p.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &items}
			return
		}
		name := rest[0].(string)
		child := p.Properties[name]
		walk(&child, rest[1:])
		props := make(map[string]apiextensionsv1.JSONSchemaProps, len(p.Properties))
		for k, v := range p.Properties {
			props[k] = v
		}
		props[name] = child
		p.Properties = props
	}
	walk(spec, path)
}

func ptr64(v int64) *int64    { return &v }
func ptrS(v string) *string   { return &v }
func deref[T any](p *T) (v T) { return derefOr(p, v) }
func derefOr[T any](p *T, v T) T {
	if p == nil {
		return v
	}
	return *p
}

// compareRoot compares the CRD's root with what the validator assumes of it: apiVersion and kind
// plain strings, metadata a plain object (the API server's generic checks, out of scope), spec as
// specSchema, and status, which the main resource never validates (package documentation), skipped.
// It returns the differences, sorted.
func compareRoot(root *apiextensionsv1.JSONSchemaProps, spec *schema) []string {
	ours := &schema{Type: "object", Properties: map[string]*schema{
		"apiVersion": str(),
		"kind":       str(),
		"metadata":   {Type: "object"},
		"spec":       spec,
	}}
	r := *root
	r.Properties = make(map[string]apiextensionsv1.JSONSchemaProps, len(root.Properties))
	for k, v := range root.Properties {
		if k != "status" {
			r.Properties[k] = v
		}
	}
	var diffs []string
	compareNode("<root>", &r, ours, &diffs)
	sort.Strings(diffs)
	return diffs
}

// compareNode appends to diffs every constraint of crd and ours that the other lacks or states
// otherwise, naming the field path (p; "[]" for the items of an array).
func compareNode(p string, crd *apiextensionsv1.JSONSchemaProps, ours *schema, diffs *[]string) {
	add := func(format string, args ...any) { *diffs = append(*diffs, p+": "+fmt.Sprintf(format, args...)) }
	diff := func(what string, c, o any) {
		if !cmp.Equal(c, o) {
			add("%s: CRD %v, schema.go %v", what, c, o)
		}
	}
	child := func(name string) string {
		if p == "<root>" {
			return name
		}
		return p + "." + name
	}

	diff("type", crd.Type, ours.Type)
	diff("format", crd.Format, ours.Format)
	diff("enum", crdEnum(crd.Enum), quoted(ours.Enum))
	diff("required", sortedCopy(crd.Required), sortedCopy(ours.Required))
	diff("minLength", renderBound(crd.MinLength), renderBound(ours.MinLength))
	diff("maxLength", renderBound(crd.MaxLength), renderBound(ours.MaxLength))
	diff("minItems", renderBound(crd.MinItems), renderBound(ours.MinItems))
	diff("maxItems", renderBound(crd.MaxItems), renderBound(ours.MaxItems))
	diff("minimum", renderFloat(crd.Minimum), renderBound(ours.Minimum))
	diff("maximum", renderFloat(crd.Maximum), renderBound(ours.Maximum))
	diff("x-kubernetes-list-type", deref(crd.XListType), ours.ListType)
	diff("x-kubernetes-list-map-keys", crd.XListMapKeys, ours.ListMapKeys)
	diff("x-kubernetes-map-type", deref(crd.XMapType), ours.MapType)
	diff("x-kubernetes-embedded-resource", crd.XEmbeddedResource, ours.Embedded)
	diff("x-kubernetes-preserve-unknown-fields", deref(crd.XPreserveUnknownFields), ours.PreserveUnknown)
	diff("rules", crdRules(crd.XValidations), ourRules(ours.Rules))
	for _, r := range crd.XValidations {
		if r.MessageExpression != "" || r.Reason != nil || r.FieldPath != "" || r.OptionalOldSelf != nil {
			add("rule %q: messageExpression, reason, fieldPath or optionalOldSelf: not in schema.go", r.Rule)
		}
	}
	for i, r := range ours.Rules {
		if r.Transition != strings.Contains(r.Rule, "oldSelf") {
			add("rule %q: Transition is %t", r.Rule, r.Transition)
		}
		if r.Holds == nil {
			add("rule %q: no Holds", r.Rule)
		}
		for _, k := range r.Reads {
			if !strings.Contains(r.Rule, "self."+k) {
				add("rule %d reads %s, its source does not", i, k)
			}
		}
	}

	// Constraints schema.go has no field for: present in the CRD, they are not reproduced.
	for what, set := range map[string]bool{
		"pattern " + crd.Pattern:                                  crd.Pattern != "",
		fmt.Sprintf("minProperties %d", deref(crd.MinProperties)): crd.MinProperties != nil,
		fmt.Sprintf("maxProperties %d", deref(crd.MaxProperties)): crd.MaxProperties != nil,
		fmt.Sprintf("multipleOf %v", deref(crd.MultipleOf)):       crd.MultipleOf != nil,
		"exclusiveMinimum":                                        crd.ExclusiveMinimum,
		"exclusiveMaximum":                                        crd.ExclusiveMaximum,
		"uniqueItems":                                             crd.UniqueItems,
		"nullable":                                                crd.Nullable,
		"default":                                                 crd.Default != nil,
		"x-kubernetes-int-or-string":                              crd.XIntOrString,
		"allOf, anyOf, oneOf or not":                              len(crd.AllOf)+len(crd.AnyOf)+len(crd.OneOf) > 0 || crd.Not != nil,
		"patternProperties or dependencies":                       len(crd.PatternProperties)+len(crd.Dependencies) > 0,
		"additionalItems":                                         crd.AdditionalItems != nil,
		"items as a list of schemas":                              crd.Items != nil && crd.Items.Schema == nil,
		"additionalProperties: false":                             crd.AdditionalProperties != nil && crd.AdditionalProperties.Schema == nil && !crd.AdditionalProperties.Allows,
	} {
		if set {
			add("%s: not in schema.go", what)
		}
	}

	for name := range crd.Properties {
		if _, ok := ours.Properties[name]; !ok {
			*diffs = append(*diffs, child(name)+": in the CRD, not in schema.go")
		}
	}
	for name, o := range ours.Properties {
		c, ok := crd.Properties[name]
		if !ok {
			*diffs = append(*diffs, child(name)+": in schema.go, not in the CRD")
			continue
		}
		compareNode(child(name), &c, o, diffs)
	}

	// The schemas of the values of a map and of the items of a list: on both sides or on neither.
	var crdAdditional, crdItems *apiextensionsv1.JSONSchemaProps
	if crd.AdditionalProperties != nil {
		crdAdditional = crd.AdditionalProperties.Schema
	}
	if crd.Items != nil {
		crdItems = crd.Items.Schema
	}
	for _, sub := range []struct {
		what, path string
		crd        *apiextensionsv1.JSONSchemaProps
		ours       *schema
	}{
		{"additionalProperties", p + "[*]", crdAdditional, ours.AdditionalProperties},
		{"items", p + "[]", crdItems, ours.Items},
	} {
		switch {
		case sub.crd != nil && sub.ours != nil:
			compareNode(sub.path, sub.crd, sub.ours, diffs)
		case sub.crd != nil || sub.ours != nil:
			add("%s: CRD %t, schema.go %t", sub.what, sub.crd != nil, sub.ours != nil)
		}
	}
}

// renderBound renders an optional bound; "-" is none.
func renderBound(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

// renderFloat renders a minimum or maximum of the CRD as renderBound does, keeping a fraction if any.
func renderFloat(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func crdEnum(values []apiextensionsv1.JSON) []string {
	var out []string
	for _, v := range values {
		out = append(out, string(v.Raw))
	}
	return out
}

func quoted(values []string) []string {
	var out []string
	for _, v := range values {
		raw, _ := json.Marshal(v)
		out = append(out, string(raw))
	}
	return out
}

func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(s))
}

func crdRules(rules apiextensionsv1.ValidationRules) []string {
	out := []string{}
	for _, r := range rules {
		out = append(out, fmt.Sprintf("%q (%s)", r.Rule, r.Message))
	}
	return out
}

func ourRules(rules []rule) []string {
	out := []string{}
	for _, r := range rules {
		out = append(out, fmt.Sprintf("%q (%s)", r.Rule, r.Message))
	}
	return out
}
