package secretuse

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
)

// UnusedIndex is UnusedSecrets kept up to date one change at a time: it is told every
// ClusterObjectSet and every Secret of the system namespace as they are added, changed and removed
// (an informer's events, in any order between the two kinds), and always holds exactly the
// object-data Secrets that UnusedSecrets would return for what it was told, with their sizes. Each
// change costs what the changed object refers to, not what the index holds, so a caller may ask it
// on every request. It holds names, UIDs and sizes, never a Secret's data.
//
// An UnusedIndex is not safe for concurrent use; NewUnusedIndex returns one.
type UnusedIndex struct {
	ns string
	// sets are the ClusterObjectSets by name: what each counted.
	sets map[string]indexedSet
	// existing are the UIDs of the ClusterObjectSets told (an owner of that UID exists).
	existing map[types.UID]bool
	// users counts, by Secret name in ns, the live ClusterObjectSets that reference it.
	users map[string]int
	// secrets are the Secrets of ns, by name.
	secrets map[string]indexedSecret
	// ownedBy are the Secrets of ns by the UID of each ClusterObjectSet their owner references name.
	ownedBy map[types.UID]map[string]bool
	// unused are the Secrets UnusedSecrets returns, with their sizes, and bytes their sum.
	unused map[string]int64
	bytes  int64
}

// someUser stands for the users of a Secret that has some.
var someUser = make([]Use, 1)

// indexedSet is what the index counted of a ClusterObjectSet.
type indexedSet struct {
	uid types.UID
	// refs are the Secrets of ns it references, each once, counted in users when live.
	refs []string
	live bool
}

// indexedSecret is what the index knows of a Secret.
type indexedSecret struct {
	objectData bool
	// owners are the UIDs its ClusterObjectSet owner references name.
	owners []types.UID
	size   int64
}

// NewUnusedIndex returns an empty index of the object-data Secrets of systemNamespace.
func NewUnusedIndex(systemNamespace string) *UnusedIndex {
	return &UnusedIndex{ns: systemNamespace, sets: map[string]indexedSet{}, existing: map[types.UID]bool{},
		users: map[string]int{}, secrets: map[string]indexedSecret{}, ownedBy: map[types.UID]map[string]bool{},
		unused: map[string]int64{}}
}

// SetClusterObjectSet records cos as it is now (added or changed).
func (x *UnusedIndex) SetClusterObjectSet(cos *olmv1.ClusterObjectSet) {
	next := indexedSet{uid: cos.UID, live: Live(cos)}
	for _, key := range cos.ReferencedSecrets(x.ns) {
		if key.Namespace == x.ns {
			next.refs = append(next.refs, key.Name)
		}
	}
	x.replaceSet(cos.Name, next, true)
}

// DeleteClusterObjectSet records that the ClusterObjectSet name is gone.
func (x *UnusedIndex) DeleteClusterObjectSet(name string) {
	x.replaceSet(name, indexedSet{}, false)
}

// replaceSet replaces what the index counted of the ClusterObjectSet name by next (exists) or by
// nothing, and judges again the Secrets whose verdict that may change.
func (x *UnusedIndex) replaceSet(name string, next indexedSet, exists bool) {
	prev, had := x.sets[name]
	affected := map[string]bool{}
	if had {
		x.count(prev, -1, affected)
		delete(x.existing, prev.uid)
		for s := range x.ownedBy[prev.uid] {
			affected[s] = true
		}
		delete(x.sets, name)
	}
	if exists {
		x.sets[name] = next
		x.existing[next.uid] = true
		x.count(next, 1, affected)
		for s := range x.ownedBy[next.uid] {
			affected[s] = true
		}
	}
	for s := range affected {
		x.judge(s)
	}
}

// count adds d to the users of the Secrets a live set references, noting them in affected.
func (x *UnusedIndex) count(set indexedSet, d int, affected map[string]bool) {
	for _, s := range set.refs {
		affected[s] = true
		if !set.live {
			continue
		}
		if x.users[s] += d; x.users[s] == 0 {
			delete(x.users, s)
		}
	}
}

// SetSecret records sec as it is now (added or changed), holding size bytes of data (its data may
// have been dropped already: the caller measured it). A Secret of another namespace is ignored.
func (x *UnusedIndex) SetSecret(sec *corev1.Secret, size int64) {
	if sec.Namespace != x.ns {
		return
	}
	next := indexedSecret{objectData: sec.Type == olmv1.SecretTypeObjectData, size: size}
	for _, ref := range sec.OwnerReferences {
		if collision.IsClusterObjectSetRef(ref) && !slices.Contains(next.owners, ref.UID) {
			next.owners = append(next.owners, ref.UID)
		}
	}
	x.unown(sec.Name)
	x.secrets[sec.Name] = next
	for _, uid := range next.owners {
		if x.ownedBy[uid] == nil {
			x.ownedBy[uid] = map[string]bool{}
		}
		x.ownedBy[uid][sec.Name] = true
	}
	x.judge(sec.Name)
}

// DeleteSecret records that the Secret key is gone.
func (x *UnusedIndex) DeleteSecret(key types.NamespacedName) {
	if key.Namespace != x.ns {
		return
	}
	x.unown(key.Name)
	delete(x.secrets, key.Name)
	x.judge(key.Name)
}

// unown forgets the owners of the Secret name.
func (x *UnusedIndex) unown(name string) {
	for _, uid := range x.secrets[name].owners {
		delete(x.ownedBy[uid], name)
		if len(x.ownedBy[uid]) == 0 {
			delete(x.ownedBy, uid)
		}
	}
}

// judge decides again whether the Secret name is unused (UnusedSecrets' rule).
func (x *UnusedIndex) judge(name string) {
	sec, ok := x.secrets[name]
	var users []Use // Unused asks only whether there are any
	if x.users[name] > 0 {
		users = someUser
	}
	unused := ok && sec.objectData && Unused(users, slices.ContainsFunc(sec.owners, func(uid types.UID) bool { return x.existing[uid] }))
	prev, was := x.unused[name]
	if was {
		x.bytes -= prev
		delete(x.unused, name)
	}
	if unused {
		x.unused[name] = sec.size
		x.bytes += sec.size
	}
}

// Unused returns how many Secrets are unused and their bytes.
func (x *UnusedIndex) Unused() (int, int64) {
	return len(x.unused), x.bytes
}

// IsUnused reports whether the Secret key is unused.
func (x *UnusedIndex) IsUnused(key types.NamespacedName) bool {
	_, ok := x.unused[key.Name]
	return ok && key.Namespace == x.ns
}

// Exists reports whether the index was told the Secret key exists (of any type, used or not).
func (x *UnusedIndex) Exists(key types.NamespacedName) bool {
	_, ok := x.secrets[key.Name]
	return ok && key.Namespace == x.ns
}

// UnusedNames returns the names of the unused Secrets, sorted (tests, diagnostics).
func (x *UnusedIndex) UnusedNames() []string {
	names := make([]string, 0, len(x.unused))
	for name := range x.unused {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
