package validation

import (
	"math"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Bounds are the numeric bounds (minimum, maximum, minItems, maxItems, minLength, maxLength) of the
// ClusterObjectSet CRD as a cluster serves it. A cluster may change them in its CRD (upstream's own
// e2e lowers spec.progressDeadlineMinutes' minimum to test deadlines); validation then enforces the
// served bounds, not a second copy of the generated ones. The zero value is the generated CRD's.
type Bounds struct {
	// spec is the schema of .spec with the served bounds; nil means specSchema.
	spec *schema
}

// BoundsFromCRD returns the bounds the served CRD sets where they differ from the generated CRD's,
// for every field this package knows. A CRD without the v1 schema gives the generated bounds.
func BoundsFromCRD(crd *apiextensionsv1.CustomResourceDefinition) Bounds {
	if crd == nil {
		return Bounds{}
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != olmv1.GroupVersion.Version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		served, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return Bounds{}
		}
		if s, changed := withBounds(specSchema, &served); changed {
			return Bounds{spec: s}
		}
	}
	return Bounds{}
}

// Differs reports whether l holds bounds other than the generated CRD's.
func (l Bounds) Differs() bool { return l.spec != nil }

func (l Bounds) schema() *schema {
	if l.spec == nil {
		return specSchema
	}
	return l.spec
}

// ValidateCreate is ValidateCreate with the served bounds.
func (l Bounds) ValidateCreate(obj *olmv1.ClusterObjectSet) field.ErrorList {
	return validateCreate(obj, toWire, l.schema())
}

// ValidateUpdate is ValidateUpdate with the served bounds.
func (l Bounds) ValidateUpdate(old, obj *olmv1.ClusterObjectSet) field.ErrorList {
	return validateUpdate(old, obj, toWire, l.schema())
}

// withBounds returns ours with the bounds of served wherever they differ, sharing every node whose
// subtree is unchanged (copy on write), and whether anything differed.
func withBounds(ours *schema, served *apiextensionsv1.JSONSchemaProps) (*schema, bool) {
	if ours == nil || served == nil {
		return ours, false
	}
	out := *ours
	changed := false
	set := func(dst **int64, v *int64) {
		if !sameBound(*dst, v) {
			*dst, changed = v, true
		}
	}
	set(&out.Minimum, bound(served.Minimum, math.Ceil))
	set(&out.Maximum, bound(served.Maximum, math.Floor))
	set(&out.MinItems, served.MinItems)
	set(&out.MaxItems, served.MaxItems)
	set(&out.MinLength, served.MinLength)
	set(&out.MaxLength, served.MaxLength)
	cloned := false
	for k, ps := range ours.Properties {
		sp, ok := served.Properties[k]
		if !ok {
			continue
		}
		child, c := withBounds(ps, &sp)
		if !c {
			continue
		}
		if !cloned {
			out.Properties = make(map[string]*schema, len(ours.Properties))
			for k, v := range ours.Properties {
				out.Properties[k] = v
			}
			cloned = true
		}
		out.Properties[k], changed = child, true
	}
	if ours.Items != nil && served.Items != nil && served.Items.Schema != nil {
		if child, c := withBounds(ours.Items, served.Items.Schema); c {
			out.Items, changed = child, true
		}
	}
	if !changed {
		return ours, false
	}
	return &out, true
}

// bound turns a served numeric bound into the integer bound it means for an integer field.
func bound(f *float64, round func(float64) float64) *int64 {
	if f == nil {
		return nil
	}
	v := int64(round(*f))
	return &v
}

func sameBound(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
