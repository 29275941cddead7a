package admission

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

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
