package validation

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// corr is the correlation of a node of the new object with the old object during an update, which
// decides ratcheting: an error raised at a node is dropped when the nearest node at or above it that
// correlates with an old value is unchanged. Object fields correlate by name, items of list-type=map
// lists by key; items of other lists do not correlate. A nil *corr (a create) ratchets nothing.
type corr struct {
	old     any
	ok      bool      // this node has a correlated old value
	nearest *ratchetN // the nearest correlated node at or above this one
}

type ratchetN struct {
	newV, oldV any
	s          *schema
	done, eq   bool
}

func (r *ratchetN) unchanged() bool {
	if r == nil {
		return false
	}
	if !r.done {
		r.eq, r.done = unchanged(r.newV, r.oldV, r.s), true
	}
	return r.eq
}

func rootCorr(newV, oldV any, s *schema) *corr {
	return &corr{old: oldV, ok: true, nearest: &ratchetN{newV: newV, oldV: oldV, s: s}}
}

// ratchets reports whether errors raised at this node are dropped.
func (c *corr) ratchets() bool { return c != nil && c.nearest.unchanged() }

// key returns the correlation of field k (with schema ps) of the object newV.
func (c *corr) key(k string, newV any, ps *schema) *corr {
	if c == nil {
		return nil
	}
	if c.ok {
		if m, isMap := c.old.(map[string]any); isMap && ps != nil {
			if old, found := m[k]; found {
				return &corr{old: old, ok: true, nearest: &ratchetN{newV: newV, oldV: old, s: ps}}
			}
		}
	}
	return &corr{nearest: c.nearest}
}

// index returns the correlation of item newV of a list with schema s.
func (c *corr) index(item any, s *schema) *corr {
	if c == nil {
		return nil
	}
	if c.ok {
		if oldList, isList := c.old.([]any); isList && s.Items != nil {
			if old := correlateItem(item, oldList, s); old != nil {
				return &corr{old: old, ok: true, nearest: &ratchetN{newV: item, oldV: old, s: s.Items}}
			}
		}
	}
	return &corr{nearest: c.nearest}
}

// oldValue is the old value of the node as CEL's oldSelf sees it, and whether there is one.
func (c *corr) oldValue() (any, bool) {
	if c == nil || !c.ok || c.old == nil {
		return nil, false
	}
	return c.old, true
}

// checker collects errors, dropping those of unchanged nodes.
type checker struct {
	errs field.ErrorList
}

func (ch *checker) add(c *corr, e *field.Error) {
	if c.ratchets() {
		return
	}
	ch.errs = append(ch.errs, e)
}

// checkSchema is the OpenAPI stage of the API server (kube-openapi's validator): required fields,
// enums, lengths, bounds and item counts, with the same paths and messages. The errors of the bound
// checks carry the bound's JSON Schema keyword as their Origin (BoundError).
func (ch *checker) checkSchema(p *field.Path, v any, s *schema, c *corr) {
	if s == nil || v == nil {
		return
	}
	switch x := v.(type) {
	case string:
		ch.checkString(p, x, s, c)
	case int64:
		ch.checkInt(p, x, s, c)
	case []any:
		n := int64(len(x))
		if s.MinItems != nil && n < *s.MinItems {
			ch.add(c, field.Invalid(p, n, fmt.Sprintf("%s in body should have at least %d items", p, *s.MinItems)).WithOrigin(originMinItems))
		}
		if s.MaxItems != nil && n > *s.MaxItems {
			ch.add(c, field.TooMany(p, len(x), int(*s.MaxItems)).WithOrigin(originMaxItems))
		}
		for i, item := range x {
			ch.checkSchema(p.Index(i), item, s.Items, c.index(item, s))
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if ps, ok := s.Properties[k]; ok {
				ch.checkSchema(p.Child(k), x[k], ps, c.key(k, x[k], ps))
			} else if s.AdditionalProperties != nil {
				// kube-openapi joins the key with a dot, whatever it holds.
				ch.checkSchema(p.Child(k), x[k], s.AdditionalProperties, c.key(k, x[k], s.AdditionalProperties))
			}
		}
		for _, k := range s.Required {
			if _, ok := x[k]; !ok {
				ch.add(c, field.Required(p.Child(k), ""))
			}
		}
	}
}

func (ch *checker) checkString(p *field.Path, v string, s *schema, c *corr) {
	// Lengths count characters, though the message of a too long value says bytes.
	n := int64(utf8.RuneCountInString(v))
	if s.MinLength != nil && n < *s.MinLength {
		ch.add(c, field.Invalid(p, v, fmt.Sprintf("%s in body should be at least %d chars long", p, *s.MinLength)).WithOrigin(originMinLength))
	}
	if s.MaxLength != nil && n > *s.MaxLength {
		ch.add(c, field.TooLong(p, "", int(*s.MaxLength)).WithOrigin(originMaxLength))
	}
	if len(s.Enum) > 0 && !contains(s.Enum, v) {
		ch.add(c, field.NotSupported(p, v, s.Enum))
	}
}

func (ch *checker) checkInt(p *field.Path, v int64, s *schema, c *corr) {
	if s.Maximum != nil && v > *s.Maximum {
		ch.add(c, field.Invalid(p, v, fmt.Sprintf("%s in body should be less than or equal to %d", p, *s.Maximum)).WithOrigin(originMaximum))
	}
	if s.Minimum != nil && v < *s.Minimum {
		ch.add(c, field.Invalid(p, v, fmt.Sprintf("%s in body should be greater than or equal to %d", p, *s.Minimum)).WithOrigin(originMinimum))
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
