package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func TestArchive(t *testing.T) {
	rev := func(name, owner string, n int64, state olmv1.LifecycleState) olmv1.ClusterObjectSet {
		c := olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
			Spec: olmv1.ClusterObjectSetSpec{Revision: n, LifecycleState: state}}
		if owner != "" {
			c.Labels = map[string]string{olmv1.LabelOwnerName: owner}
		}
		return c
	}
	active, archived := olmv1.LifecycleStateActive, olmv1.LifecycleStateArchived
	deleting := func(c olmv1.ClusterObjectSet) olmv1.ClusterObjectSet {
		now := metav1.Now()
		c.DeletionTimestamp = &now
		return c
	}
	self := rev("v5", "app", 5, active)
	tests := map[string]struct {
		self        olmv1.ClusterObjectSet
		list        []olmv1.ClusterObjectSet
		keep        int
		wantArchive []string
		wantRemove  []string
	}{
		"older active revisions are archived": {self: self, keep: 5,
			list: []olmv1.ClusterObjectSet{self, rev("v3", "app", 3, active), rev("v4", "app", 4, active)}, wantArchive: []string{"v3", "v4"}},
		"a newer active revision is left alone": {self: self, keep: 5,
			list: []olmv1.ClusterObjectSet{self, rev("v6", "app", 6, active)}},
		"the same revision number is left alone": {self: self, keep: 5,
			list: []olmv1.ClusterObjectSet{self, rev("v5b", "app", 5, active)}},
		"other owners are left alone": {self: self, keep: 5,
			list: []olmv1.ClusterObjectSet{self, rev("x1", "other", 1, active), rev("x0", "", 0, active)}},
		"revisions being deleted are left alone": {self: self, keep: 0,
			list: []olmv1.ClusterObjectSet{self, deleting(rev("v4", "app", 4, active)), deleting(rev("v1", "app", 1, archived))}},
		"no owner label: no predecessors": {self: rev("lone", "", 5, active), keep: 0,
			list: []olmv1.ClusterObjectSet{rev("v4", "", 4, active)}},
		"archived beyond keep are deleted, oldest first": {self: self, keep: 2,
			list:       []olmv1.ClusterObjectSet{rev("v1", "app", 1, archived), rev("v4", "app", 4, archived), self, rev("v2", "app", 2, archived), rev("v3", "app", 3, archived)},
			wantRemove: []string{"v2", "v1"}},
		"the revisions archived now count towards keep": {self: self, keep: 2,
			list:        []olmv1.ClusterObjectSet{rev("v4", "app", 4, active), rev("v3", "app", 3, archived), rev("v2", "app", 2, archived)},
			wantArchive: []string{"v4"}, wantRemove: []string{"v2"}},
		"keep 0 deletes every archived one": {self: self, keep: 0,
			list:        []olmv1.ClusterObjectSet{rev("v4", "app", 4, active), rev("v3", "app", 3, archived)},
			wantArchive: []string{"v4"}, wantRemove: []string{"v4", "v3"}},
		"a negative keep is 0": {self: self, keep: -1,
			list: []olmv1.ClusterObjectSet{rev("v3", "app", 3, archived)}, wantRemove: []string{"v3"}},
	}
	names := func(cs []*olmv1.ClusterObjectSet) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			archive, remove := Archive(&tc.self, tc.list, tc.keep)
			if diff := cmp.Diff(tc.wantArchive, names(archive)); diff != "" {
				t.Errorf("archive (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRemove, names(remove)); diff != "" {
				t.Errorf("remove (-want +got):\n%s", diff)
			}
		})
	}
}
