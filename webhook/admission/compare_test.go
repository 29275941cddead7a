package admission

import (
	"errors"
	"testing"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func TestSameContent(t *testing.T) {
	store := map[string]map[string]any{
		"s/a": cm("a", "1").Object.Object,
		"s/b": cm("b", "2").Object.Object,
	}
	resolve := func(r olmv1.ObjectSourceRef) (map[string]any, error) {
		if o, ok := store[r.Name+"/"+r.Key]; ok && (r.Namespace == "" || r.Namespace == "sys") {
			return o, nil
		}
		return nil, errors.New("not found")
	}
	phase := func(name string, objs ...olmv1.ClusterObjectSetObject) olmv1.ClusterObjectSetPhase {
		return olmv1.ClusterObjectSetPhase{Name: name, Objects: objs}
	}
	stored := []olmv1.ClusterObjectSetPhase{phase("p", ref("s", "sys", "a"), ref("s", "sys", "b"))}
	tests := map[string]struct {
		old, updated []olmv1.ClusterObjectSetPhase
		want         bool
		wantErr      bool
	}{
		"inline form of the stored refs": {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"), cm("b", "2"))}, want: true},
		"same refs, namespace defaulted": {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", ref("s", "", "a"), ref("s", "sys", "b"))}, want: true},
		"mixed inline and ref":           {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"), ref("s", "sys", "b"))}, want: true},
		"changed value":                  {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"), cm("b", "3"))}, want: false},
		"swapped order":                  {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("b", "2"), cm("a", "1"))}, want: false},
		"renamed phase":                  {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("q", cm("a", "1"), cm("b", "2"))}, want: false},
		"extra phase":                    {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"), cm("b", "2")), phase("q")}, want: false},
		"object missing":                 {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"))}, want: false},
		"collision protection added":     {old: stored, updated: []olmv1.ClusterObjectSetPhase{{Name: "p", CollisionProtection: olmv1.CollisionProtectionNone, Objects: []olmv1.ClusterObjectSetObject{cm("a", "1"), cm("b", "2")}}}, want: false},
		"stored ref cannot be read":      {old: []olmv1.ClusterObjectSetPhase{phase("p", ref("gone", "sys", "a"))}, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"))}, wantErr: true},
		"inline on both sides, same":     {old: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"))}, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"))}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := SameContent(tc.old, tc.updated, "sys", resolve)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("SameContent = %v, want %v", got, tc.want)
			}
		})
	}
}
