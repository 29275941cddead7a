package validation

import (
	"strings"
	"testing"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func TestValidatePhaseOrder(t *testing.T) {
	withPhases := func(names ...string) *olmv1.ClusterObjectSet {
		c := &olmv1.ClusterObjectSet{}
		for _, n := range names {
			c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: n})
		}
		return c
	}
	tests := map[string]struct {
		old, updated *olmv1.ClusterObjectSet
		refused      bool
	}{
		"same order":                    {old: withPhases("a", "b", "c"), updated: withPhases("a", "b", "c")},
		"reordered":                     {old: withPhases("a", "b", "c"), updated: withPhases("c", "a", "b"), refused: true},
		"two swapped":                   {old: withPhases("a", "b"), updated: withPhases("b", "a"), refused: true},
		"empty filled once":             {old: withPhases(), updated: withPhases("b", "a")},
		"another phase (not a reorder)": {old: withPhases("a", "b"), updated: withPhases("b", "c")},
		"a phase dropped":               {old: withPhases("a", "b"), updated: withPhases("b")},
		"a create":                      {old: nil, updated: withPhases("b", "a")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := ValidatePhaseOrder(tc.old, tc.updated)
			if got := len(errs) > 0; got != tc.refused {
				t.Fatalf("refused = %v, want %v: %v", got, tc.refused, errs)
			}
			if tc.refused && (errs[0].Field != "spec.phases" || !strings.Contains(errs[0].Detail, "cannot be reordered")) {
				t.Errorf("error %v: want spec.phases and the reason", errs[0])
			}
		})
	}
}
