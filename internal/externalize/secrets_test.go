package externalize

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/validation"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
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

func TestObjectDataSecretAndUnusable(t *testing.T) {
	want := ObjectDataSecret("my-cos", "sys", content.SecretOut{Name: "my-cos-0123456789abcdef", Data: map[string][]byte{"k": []byte("{}")}})
	if want.Namespace != "sys" || want.Name != "my-cos-0123456789abcdef" || want.Type != olmv1.SecretTypeObjectData ||
		!ptr.Deref(want.Immutable, false) || want.Labels[olmv1.LabelRevisionName] != "my-cos" || len(want.OwnerReferences) != 0 {
		t.Fatalf("ObjectDataSecret = %+v", want)
	}
	tests := map[string]struct {
		change func(*corev1.Secret)
		want   []string
	}{
		"exactly ours":         {change: func(*corev1.Secret) {}},
		"annotations are fine": {change: func(s *corev1.Secret) { s.Annotations = map[string]string{content.LastUsedAnnotation: "x"} }},
		"other type":           {change: func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, want: []string{`its type is "Opaque"`}},
		"mutable":              {change: func(s *corev1.Secret) { s.Immutable = nil }, want: []string{"it is not immutable"}},
		"other label":          {change: func(s *corev1.Secret) { s.Labels = map[string]string{olmv1.LabelRevisionName: "other"} }, want: []string{"it belongs to another ClusterObjectSet"}},
		"other data": {change: func(s *corev1.Secret) { s.Data = map[string][]byte{"k": []byte("SECRET")} },
			want: []string{"its data differs from the content it must hold"}},
		"everything": {change: func(s *corev1.Secret) { *s = corev1.Secret{} },
			want: []string{`its type is ""`, "it is not immutable", "it belongs to another ClusterObjectSet", "its data differs from the content it must hold"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := want.DeepCopy()
			tc.change(got)
			why := Unusable(got, want)
			if diff := cmp.Diff(tc.want, why); diff != "" {
				t.Errorf("Unusable (-want +got):\n%s", diff)
			}
			if strings.Contains(strings.Join(why, ""), "SECRET") {
				t.Error("a reason quotes the content")
			}
		})
	}
}

func TestUpdateErrorsHint(t *testing.T) {
	old := &olmv1.ClusterObjectSet{Spec: olmv1.ClusterObjectSetSpec{LifecycleState: olmv1.LifecycleStateActive, Revision: 1,
		CollisionProtection: olmv1.CollisionProtectionPrevent, Phases: []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: []olmv1.ClusterObjectSetObject{cm("a", "1")}}}}}
	changed := old.DeepCopy()
	changed.Spec.Phases[0].Objects[0] = cm("a", "2")
	errs := UpdateErrors(validation.Limits{}, old, changed)
	if len(errs) != 1 || !strings.HasSuffix(errs[0].Error(), "phases is immutable"+ImmutablePhasesHint) {
		t.Errorf("UpdateErrors = %v", errs)
	}
	if errs := UpdateErrors(validation.Limits{}, old, old.DeepCopy()); len(errs) != 0 {
		t.Errorf("an unchanged update: %v", errs)
	}
}

func TestTooLargeFieldError(t *testing.T) {
	e := &content.TooLargeError{Phase: "p", PhaseIndex: 2, Index: 3, Kind: "ConfigMap", Name: "big", Size: 10, CompressedSize: 9, Budget: 100}
	ferr := TooLargeFieldError(e)
	if ferr.Field != "spec.phases[2].objects[3]" || ferr.Detail != e.Error() {
		t.Errorf("TooLargeFieldError = %v", ferr)
	}
}

func TestInline(t *testing.T) {
	store := map[string]map[string]any{"s/k": cm("a", "1").Object.Object}
	resolve := func(r olmv1.ObjectSourceRef) (map[string]any, error) {
		if o, ok := store[r.Name+"/"+r.Key]; ok {
			return o, nil
		}
		return nil, errors.New("secret s has no key")
	}
	phases := []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: []olmv1.ClusterObjectSetObject{
		{Ref: olmv1.ObjectSourceRef{Name: "s", Key: "k"}, CollisionProtection: olmv1.CollisionProtectionNone}, cm("b", "2")}}}
	got, err := Inline(phases, resolve)
	if err != nil {
		t.Fatal(err)
	}
	want := []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: []olmv1.ClusterObjectSetObject{
		{Object: cm("a", "1").Object, CollisionProtection: olmv1.CollisionProtectionNone}, cm("b", "2")}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got[0].Objects[0].Object.SetName("changed")
	if store["s/k"]["metadata"].(map[string]any)["name"] != "a" {
		t.Error("Inline shares the resolved object")
	}
	phases[0].Objects[0].Ref.Key = "missing"
	if _, err := Inline(phases, resolve); err == nil || err.Error() != `phase "p" object 0: secret s has no key` {
		t.Errorf("error: %v", err)
	}
}
