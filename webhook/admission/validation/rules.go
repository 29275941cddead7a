package validation

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkListMaps checks that the items of every list-type=map list have unique keys. As the API
// server does, only the second item of a repeated key is reported, with the key as the value.
func checkListMaps(p *field.Path, v any, s *schema) field.ErrorList {
	return walk(p, v, s, func(p *field.Path, v any, s *schema) field.ErrorList {
		if x, ok := v.([]any); ok && s.ListType == "map" {
			return checkListMap(p, x, s.ListMapKeys)
		}
		return nil
	})
}

func checkListMap(p *field.Path, items []any, keys []string) field.ErrorList {
	for i, item := range items {
		if _, ok := item.(map[string]any); item != nil && !ok {
			return field.ErrorList{field.Invalid(p.Index(i), item, "must be an object for an array of list-type map")}
		}
	}
	if len(items) <= 1 {
		return nil
	}
	// The identity of an item is its key fields, as JSON; absent key fields stay absent.
	seen := make(map[string]int, len(items))
	var errs field.ErrorList
	for i, item := range items {
		m, _ := item.(map[string]any)
		key := map[string]any{}
		for _, k := range keys {
			if v, ok := m[k]; ok {
				key[k] = v
			}
		}
		id, err := json.Marshal(key)
		if err != nil {
			return field.ErrorList{field.Invalid(p.Index(i), item, "internal error")}
		}
		seen[string(id)]++
		if seen[string(id)] == 2 {
			errs = append(errs, field.Duplicate(p.Index(i), key))
		}
	}
	return errs
}

// checkRules is the CEL stage: every x-kubernetes-validations rule on every value present. Rules
// without oldSelf do not report unchanged values on update (ratcheting); transition rules run only
// when the value has an old value, and always report. A rule that fails to evaluate (it reads a field
// that is absent) always reports, as the API server does, with the schema type as the value.
func (ch *checker) checkRules(p *field.Path, v any, s *schema, c *corr) {
	if s == nil || v == nil {
		return
	}
	for _, r := range s.Rules {
		if key, ok := missingRead(v, r.Reads); ok {
			ch.errs = append(ch.errs, field.Invalid(p, s.Type, "no such key: "+key+" evaluating rule: "+r.Message))
			continue
		}
		var holds bool
		if r.Transition {
			old, ok := c.oldValue()
			if !ok {
				continue
			}
			holds = r.Holds(v, old)
		} else {
			holds = r.Holds(v, nil)
		}
		if holds {
			continue
		}
		value := v
		if s.Type == "object" || s.Type == "array" {
			value = field.OmitValueType{}
		}
		e := field.Invalid(p, value, r.Message)
		if r.Transition {
			ch.errs = append(ch.errs, e)
		} else {
			ch.add(c, e)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if ps, ok := s.Properties[k]; ok {
				ch.checkRules(p.Child(k), x[k], ps, c.key(k, x[k], ps))
			} else if s.AdditionalProperties != nil {
				ch.checkRules(p.Key(k), x[k], s.AdditionalProperties, c.key(k, x[k], s.AdditionalProperties))
			}
		}
	case []any:
		for i, item := range x {
			ch.checkRules(p.Index(i), item, s.Items, c.index(item, s))
		}
	}
}

// blocking reports whether errs holds an error that keeps the API server from running CEL rules.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// SkippedMessage is the detail of the error the API server adds, with no field path, when schema
// errors kept it from running the CEL rules.
const SkippedMessage = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// Skipped returns that error. Its Field renders as "<nil>" and its ErrorBody as
// "Invalid value: null: " + SkippedMessage.
func Skipped() *field.Error { return field.Invalid(nil, nil, SkippedMessage) }

// missingRead returns the first of keys that the object v lacks.
func missingRead(v any, keys []string) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return k, true
		}
	}
	return "", false
}
