package commands

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// TestPlanned: the Secrets whose "does not exist" warnings a server-side dry run drops are those the
// plan put refs to, never the file's own refs.
func TestPlanned(t *testing.T) {
	ref := func(name, ns string) olmv1.ClusterObjectSetObject {
		return olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: name, Namespace: ns, Key: "k"}}
	}
	inline := olmv1.ClusterObjectSetObject{Object: unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap"}}}
	phases := func(objs ...olmv1.ClusterObjectSetObject) []olmv1.ClusterObjectSetPhase {
		return []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: objs}}
	}
	tests := map[string]struct {
		before, after []olmv1.ClusterObjectSetPhase
		want          map[string]bool
	}{
		"inline externalized": {before: phases(inline, inline), after: phases(ref("s", ""), ref("s", "")), want: map[string]bool{"sys/s": true}},
		"the user's own refs are not planned": {before: phases(ref("mine", ""), ref("theirs", "other"), inline),
			after: phases(ref("mine", ""), ref("theirs", "other"), ref("s", "sys")), want: map[string]bool{"sys/s": true}},
		"kept inline": {before: phases(inline), after: phases(inline), want: map[string]bool{}},
		"refs only":   {before: phases(ref("mine", "")), after: phases(ref("mine", "")), want: map[string]bool{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, planned(tc.before, tc.after, "sys")); diff != "" {
				t.Errorf("planned (-want +got):\n%s", diff)
			}
		})
	}
}
