package rollout

import (
	"sort"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Archive plans what the success of self means for the other revisions of its owner (list: the
// ClusterObjectSets carrying self's owner-name label, self among them or not): the Active ones with
// a lower spec.revision are archived, and of the archived ones (these included) all but the keep
// newest are deleted. Revisions being deleted are left alone. A revision without an owner-name label
// has no predecessors. The result points into list.
func Archive(self *olmv1.ClusterObjectSet, list []olmv1.ClusterObjectSet, keep int) (archive, remove []*olmv1.ClusterObjectSet) {
	if self.Labels[olmv1.LabelOwnerName] == "" {
		return nil, nil
	}
	var archived []*olmv1.ClusterObjectSet
	for i := range list {
		other := &list[i]
		if other.UID == self.UID || !other.DeletionTimestamp.IsZero() || other.Labels[olmv1.LabelOwnerName] != self.Labels[olmv1.LabelOwnerName] {
			continue
		}
		switch {
		case other.Spec.LifecycleState == olmv1.LifecycleStateActive && other.Spec.Revision < self.Spec.Revision:
			archive = append(archive, other)
			archived = append(archived, other)
		case other.Spec.LifecycleState == olmv1.LifecycleStateArchived:
			archived = append(archived, other)
		}
	}
	sort.SliceStable(archived, func(i, j int) bool { return archived[i].Spec.Revision > archived[j].Spec.Revision })
	return archive, archived[min(len(archived), max(keep, 0)):]
}
