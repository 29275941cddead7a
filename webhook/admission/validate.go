package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/validation"
)

// ImmutablePhasesHint is added to the CRD's "phases is immutable" refusal: editing an object of an
// existing ClusterObjectSet is not how revisions change.
const ImmutablePhasesHint = "; to change its objects, create a new ClusterObjectSet with a new name and the next revision (the reconciler hands the objects over and archives this one)"

// UpdateErrors validates an update from old to obj: the CRD's rules with bounds, the webhook's own
// phase-order rule, and the workflow hint on an immutable-phases refusal.
func UpdateErrors(bounds validation.Bounds, old, obj *olmv1.ClusterObjectSet) field.ErrorList {
	errs := append(bounds.ValidateUpdate(old, obj), validation.ValidatePhaseOrder(old, obj)...)
	for _, e := range errs {
		if e.Type == field.ErrorTypeInvalid && e.Detail == "phases is immutable" {
			e.Detail += ImmutablePhasesHint
		}
	}
	return errs
}

// validate validates with bounds (nil: the generated CRD's).
func validate(ctx context.Context, bounds Bounds, f func(validation.Bounds) field.ErrorList) field.ErrorList {
	if bounds == nil {
		return f(validation.Bounds{})
	}
	return bounds.Validate(ctx, f)
}
