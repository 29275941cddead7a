package bundle

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// ProbeSyntax describes the value of --progression-probe, for help texts.
const ProbeSyntax = `a selector and one or more assertions, separated by ";":
  kind=GROUP/KIND | kind=KIND (core group)    selects by group and kind
  selector=LABEL-SELECTOR                      selects by labels (kubectl -l syntax)
  condition=TYPE=True|False                    a status condition has that status
  fields=PATH==PATH                            two fields hold equal values
  value=PATH=VALUE                             a field holds a value (compared as a string)
e.g. "kind=cert-manager.io/Certificate;condition=Ready=True", or the probe as JSON ({"selector":...})`

// ParseProbe reads one progression probe from its flag syntax (ProbeSyntax) or as JSON. Errors say
// which part is wrong; the probe is validated with the ClusterObjectSet later.
func ParseProbe(s string) (olmv1.ProgressionProbe, error) {
	var p olmv1.ProgressionProbe
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") {
		dec := json.NewDecoder(strings.NewReader(t))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return p, fmt.Errorf("not a valid progression probe as JSON: %w", err)
		}
		return p, nil
	}
	selectors := 0
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, val, ok := strings.Cut(part, "=")
		if !ok {
			return p, fmt.Errorf("%q: want KEY=VALUE, with KEY one of kind, selector, condition, fields, value", part)
		}
		switch key {
		case "kind":
			selectors++
			group, kind, found := strings.Cut(val, "/")
			if !found {
				group, kind = "", val
			}
			if kind == "" {
				return p, fmt.Errorf("%q: want kind=GROUP/KIND or kind=KIND", part)
			}
			p.Selector = olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Group: group, Kind: kind}}
		case "selector":
			selectors++
			sel, err := metav1.ParseToLabelSelector(val)
			if err != nil {
				return p, fmt.Errorf("%q: not a label selector: %w", part, err)
			}
			p.Selector = olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: oneOf(sel)}
		case "condition", "fields", "value":
			syntax := assertionSyntax[key]
			a, b, found := strings.Cut(val, syntax.sep)
			if !found {
				return p, fmt.Errorf("%q: want %s", part, syntax.want)
			}
			p.Assertions = append(p.Assertions, syntax.assertion(a, b))
		default:
			return p, fmt.Errorf("%q: unknown key %q; want kind, selector, condition, fields or value", part, key)
		}
	}
	switch {
	case selectors == 0:
		return p, fmt.Errorf("no selector: give kind=GROUP/KIND or selector=LABEL-SELECTOR")
	case selectors > 1:
		return p, fmt.Errorf("more than one selector: give one kind= or selector=")
	case len(p.Assertions) == 0:
		return p, fmt.Errorf("no assertion: give condition=, fields= or value=")
	}
	return p, nil
}

// oneOf returns sel with exactly one of matchLabels and matchExpressions set, as the API requires:
// labels become In expressions when both are present.
func oneOf(sel *metav1.LabelSelector) metav1.LabelSelector {
	switch {
	case len(sel.MatchExpressions) == 0:
		return metav1.LabelSelector{MatchLabels: sel.MatchLabels}
	case len(sel.MatchLabels) == 0:
		return metav1.LabelSelector{MatchExpressions: sel.MatchExpressions}
	}
	out := metav1.LabelSelector{}
	for k, v := range sel.MatchLabels {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
	}
	// Map order is random: sort for a deterministic output.
	slices.SortFunc(out.MatchExpressions, func(a, b metav1.LabelSelectorRequirement) int { return strings.Compare(a.Key, b.Key) })
	out.MatchExpressions = append(out.MatchExpressions, sel.MatchExpressions...)
	return out
}

// assertionSyntax is, per assertion key of a probe's short form, what separates its two operands,
// the form an error asks for and the assertion the operands make.
var assertionSyntax = map[string]struct {
	sep, want string
	assertion func(a, b string) olmv1.Assertion
}{
	"condition": {"=", "condition=TYPE=True or condition=TYPE=False", func(typ, status string) olmv1.Assertion {
		return olmv1.Assertion{Type: olmv1.AssertionTypeConditionEqual,
			ConditionEqual: olmv1.ConditionEqualProbe{Type: typ, Status: status}}
	}},
	"fields": {"==", "fields=PATH==PATH", func(a, b string) olmv1.Assertion {
		return olmv1.Assertion{Type: olmv1.AssertionTypeFieldsEqual,
			FieldsEqual: olmv1.FieldsEqualProbe{FieldA: a, FieldB: b}}
	}},
	"value": {"=", "value=PATH=VALUE", func(path, v string) olmv1.Assertion {
		return olmv1.Assertion{Type: olmv1.AssertionTypeFieldValue,
			FieldValue: olmv1.FieldValueProbe{FieldPath: path, Value: v}}
	}},
}
