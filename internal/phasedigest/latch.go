package phasedigest

import (
	"fmt"
	"strings"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Phase is one phase of a ClusterObjectSet resolved in full: its name and its objects in spec order,
// before any mutation of ours.
type Phase struct {
	Name    string
	Objects []map[string]any
}

// Latch decides status.observedPhases for phases resolved in full. The first time (observed empty)
// it returns the digest of every phase in upstream's form (Of), to be written. Later it verifies
// every phase that has a latched digest, in the form it was latched in (Matches: upstream's, or an
// earlier release's), and returns upstream's verifyObservedPhases message naming those whose content
// changed, which blocks the rollout. A latched digest is never rewritten: latched is nil then.
func Latch(observed []olmv1.ObservedPhase, phases []Phase) (latched []olmv1.ObservedPhase, mismatch string, err error) {
	if len(observed) == 0 {
		latched = make([]olmv1.ObservedPhase, 0, len(phases))
		for _, p := range phases {
			d, err := Of(p.Name, p.Objects)
			if err != nil {
				return nil, "", err
			}
			latched = append(latched, olmv1.ObservedPhase{Name: p.Name, Digest: d})
		}
		return latched, "", nil
	}
	var mismatches []string
	for _, p := range phases {
		for _, o := range observed {
			if o.Name != p.Name {
				continue
			}
			ok, err := Matches(o.Digest, p.Name, p.Objects)
			if err != nil {
				return nil, "", err
			}
			if ok {
				continue
			}
			got, err := Of(p.Name, p.Objects)
			if err != nil {
				return nil, "", err
			}
			mismatches = append(mismatches, fmt.Sprintf("phase %q (expected digest %s, got %s)", p.Name, o.Digest, got))
		}
	}
	if len(mismatches) == 0 {
		return nil, "", nil
	}
	return nil, fmt.Sprintf("resolved content of %d phase(s) has changed: %s; a referenced object source may have been deleted and recreated with different content",
		len(mismatches), strings.Join(mismatches, "; ")), nil
}
