package phasedigest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func TestLatch(t *testing.T) {
	cm := func(v string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "ns"}, "data": map[string]any{"k": v}}
	}
	digest := func(name string, objs ...map[string]any) string {
		d, err := Of(name, objs)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	legacy, err := Legacy([]map[string]any{cm("a")})
	if err != nil {
		t.Fatal(err)
	}
	phases := []Phase{{Name: "crds", Objects: []map[string]any{cm("a")}}, {Name: "deploy", Objects: []map[string]any{cm("b")}}}
	changed := []Phase{{Name: "crds", Objects: []map[string]any{cm("a")}}, {Name: "deploy", Objects: []map[string]any{cm("x")}}}
	both := []olmv1.ObservedPhase{{Name: "crds", Digest: digest("crds", cm("a"))}, {Name: "deploy", Digest: digest("deploy", cm("b"))}}
	tests := map[string]struct {
		observed     []olmv1.ObservedPhase
		phases       []Phase
		wantLatched  []olmv1.ObservedPhase
		wantMismatch string
	}{
		"first resolution latches every phase in spec order": {phases: phases, wantLatched: both},
		"a phase without objects latches upstream's empty list": {phases: []Phase{{Name: "empty"}},
			wantLatched: []olmv1.ObservedPhase{{Name: "empty", Digest: digest("empty")}}},
		"unchanged content: nothing to write": {observed: both, phases: phases},
		"changed content names the phase, both digests": {observed: both, phases: changed,
			wantMismatch: `resolved content of 1 phase(s) has changed: phase "deploy" (expected digest ` + digest("deploy", cm("b")) + ", got " +
				digest("deploy", cm("x")) + "); a referenced object source may have been deleted and recreated with different content"},
		"every changed phase is counted": {observed: both, phases: []Phase{{Name: "crds", Objects: []map[string]any{cm("y")}}, {Name: "deploy", Objects: []map[string]any{cm("x")}}},
			wantMismatch: `resolved content of 2 phase(s) has changed: phase "crds" (expected digest ` + digest("crds", cm("a")) + ", got " + digest("crds", cm("y")) +
				`); phase "deploy" (expected digest ` + digest("deploy", cm("b")) + ", got " + digest("deploy", cm("x")) +
				"); a referenced object source may have been deleted and recreated with different content"},
		"an earlier release's digest is verified as it is and kept": {observed: []olmv1.ObservedPhase{{Name: "crds", Digest: legacy}},
			phases: []Phase{{Name: "crds", Objects: []map[string]any{cm("a")}}}},
		"an earlier release's digest that no longer matches blocks": {observed: []olmv1.ObservedPhase{{Name: "crds", Digest: legacy}},
			phases: []Phase{{Name: "crds", Objects: []map[string]any{cm("z")}}},
			wantMismatch: `resolved content of 1 phase(s) has changed: phase "crds" (expected digest ` + legacy + ", got " + digest("crds", cm("z")) +
				"); a referenced object source may have been deleted and recreated with different content"},
		"a phase latched under no spec name is ignored": {observed: []olmv1.ObservedPhase{{Name: "gone", Digest: "sha256:00"}}, phases: phases},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			latched, mismatch, err := Latch(tc.observed, tc.phases)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLatched, latched); diff != "" {
				t.Errorf("latched (-want +got):\n%s", diff)
			}
			if mismatch != tc.wantMismatch {
				t.Errorf("mismatch = %q\nwant       %q", mismatch, tc.wantMismatch)
			}
		})
	}
}
