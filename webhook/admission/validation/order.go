package validation

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// ValidatePhaseOrder refuses an update that lists the stored phases in another order. Phases roll out
// in the order they are listed and are immutable once set, but the CRD cannot say so: CEL equality of
// a list-map ignores order. So this rule is the webhook's own, beyond ValidateUpdate's reproduction
// of the CRD. Any other change of the phases is left to ValidateUpdate.
func ValidatePhaseOrder(old, obj *olmv1.ClusterObjectSet) field.ErrorList {
	if old == nil || obj == nil || len(old.Spec.Phases) == 0 || len(old.Spec.Phases) != len(obj.Spec.Phases) {
		return nil
	}
	before, after := phaseNames(old.Spec.Phases), phaseNames(obj.Spec.Phases)
	if slices.Equal(before, after) {
		return nil
	}
	sortedBefore, sortedAfter := slices.Sorted(slices.Values(before)), slices.Sorted(slices.Values(after))
	if !slices.Equal(sortedBefore, sortedAfter) {
		return nil // other phases, not a reorder: ValidateUpdate reports the change
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "phases"), fmt.Sprintf(
		"phases roll out in the order they are listed and cannot be reordered (stored order %v, submitted %v); create a new ClusterObjectSet, with a new name and revision, to change them",
		before, after))}
}

func phaseNames(phases []olmv1.ClusterObjectSetPhase) []string {
	names := make([]string, len(phases))
	for i, p := range phases {
		names[i] = p.Name
	}
	return names
}
