package admission

import (
	"strings"
	"testing"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/validation"
)

func TestUpdateErrorsHint(t *testing.T) {
	old := &olmv1.ClusterObjectSet{Spec: olmv1.ClusterObjectSetSpec{LifecycleState: olmv1.LifecycleStateActive, Revision: 1,
		CollisionProtection: olmv1.CollisionProtectionPrevent, Phases: []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: []olmv1.ClusterObjectSetObject{cm("a", "1")}}}}}
	changed := old.DeepCopy()
	changed.Spec.Phases[0].Objects[0] = cm("a", "2")
	errs := UpdateErrors(validation.Bounds{}, old, changed)
	if len(errs) != 1 || !strings.HasSuffix(errs[0].Error(), "phases is immutable"+ImmutablePhasesHint) {
		t.Errorf("UpdateErrors = %v", errs)
	}
	if errs := UpdateErrors(validation.Bounds{}, old, old.DeepCopy()); len(errs) != 0 {
		t.Errorf("an unchanged update: %v", errs)
	}
}
