package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

func TestPlanInputAndWithRefs(t *testing.T) {
	phases := []olmv1.ClusterObjectSetPhase{
		{Name: "a", Objects: []olmv1.ClusterObjectSetObject{cm("x", "1"), ref("given", "elsewhere", "k")}},
		{Name: "b", CollisionProtection: olmv1.CollisionProtectionNone, Objects: []olmv1.ClusterObjectSetObject{
			{Object: cm("y", "2").Object, CollisionProtection: olmv1.CollisionProtectionIfNoController}}},
	}
	obj := &olmv1.ClusterObjectSet{Spec: olmv1.ClusterObjectSetSpec{Phases: phases}}
	in := PlanInput(obj)
	want := content.Input{Phases: []content.PhaseInput{
		{Name: "a", Objects: []content.ObjectInput{{Object: cm("x", "1").Object.Object}, {Keep: &content.RefOut{SecretName: "given", Key: "k"}}}},
		{Name: "b", Objects: []content.ObjectInput{{Object: cm("y", "2").Object.Object}}},
	}}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Fatalf("PlanInput (-want +got):\n%s", diff)
	}
	plan, err := content.PlanFor("cos", in, content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := WithRefs(phases, plan, "sys")
	secret := plan.Secrets[0].Name
	wantPhases := []olmv1.ClusterObjectSetPhase{
		{Name: "a", Objects: []olmv1.ClusterObjectSetObject{
			{Ref: olmv1.ObjectSourceRef{Name: secret, Namespace: "sys", Key: plan.Refs[0][0].Key}},
			ref("given", "elsewhere", "k"),
		}},
		{Name: "b", CollisionProtection: olmv1.CollisionProtectionNone, Objects: []olmv1.ClusterObjectSetObject{
			{Ref: olmv1.ObjectSourceRef{Name: secret, Namespace: "sys", Key: plan.Refs[1][0].Key}, CollisionProtection: olmv1.CollisionProtectionIfNoController}}},
	}
	if diff := cmp.Diff(wantPhases, got); diff != "" {
		t.Errorf("WithRefs (-want +got):\n%s", diff)
	}
	if phases[0].Objects[0].IsRef() {
		t.Error("WithRefs changed its input")
	}
}

func TestTooLargeFieldError(t *testing.T) {
	e := &content.TooLargeError{Phase: "p", PhaseIndex: 2, Index: 3, Kind: "ConfigMap", Name: "big", Size: 10, CompressedSize: 9, Budget: 100}
	ferr := TooLargeFieldError(e)
	if ferr.Field != "spec.phases[2].objects[3]" || ferr.Detail != e.Error() {
		t.Errorf("TooLargeFieldError = %v", ferr)
	}
}
