package adversarial_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
)

// Op is one step of a run: what users, GitOps tools, admins and failures do. Every choice is made when
// the op is generated, from the model alone, so a sequence of ops replays exactly on its own
// (COS_ADV_REPLAY) and any subsequence is still a valid sequence (an op whose target is gone does
// nothing).
type Op struct {
	Kind    string `json:"kind"`
	Owner   int    `json:"owner,omitempty"`
	Rev     int64  `json:"rev,omitempty"`
	From    int64  `json:"from,omitempty"`
	Variant string `json:"variant,omitempty"`
	Seed    uint64 `json:"seed,omitempty"`
	// Round groups ops that run at the same time: consecutive ops with the same non-zero Round run
	// concurrently, one worker each (COS_ADV_WORKERS); 0 runs alone.
	Round int `json:"round,omitempty"`
}

func (o Op) String() string {
	b, _ := json.Marshal(o)
	return string(b)
}

// The kinds of ops.
const (
	opApply      = "apply"     // a new revision, inline: Variant ssa, create, kubectl (client-side), large, always, invalid
	opCopy       = "copy-refs" // a new revision whose phases are revision From's stored refs, copied
	opEmpty      = "empty"     // a new revision with no phases yet
	opFill       = "fill"      // fill an empty revision's phases once
	opArchive    = "archive"   // a user archives a revision
	opDelete     = "delete"    // delete with propagation Variant: Background, Foreground, Orphan
	opRecreate   = "recreate"  // delete, wait until gone, create again from the same manifests
	opRestore    = "restore"   // back up the stored COS and its Secrets, delete, restore (Variant cos-first, secrets-first)
	opSecretDel  = "secret-delete"
	opSecretColl = "secret-deletecollection"
	opSecretEdit = "secret-edit" // Variant label, owners
	opDrift      = "drift"       // another client edits a managed object
	opBad        = "bad-refs"    // refs to a gzip bomb (Variant bomb) or a corrupt value (corrupt)
	opRestart    = "restart"     // the manager restarts
	opFailover   = "failover"    // a second replica starts, the leader is killed
	opDown       = "webhook-down"
	opOLMOwners  = "olm-owners"              // OLM's operator-controller (exempt) sets a Secret's owners to one ClusterObjectSet
	opNSDelete   = "delete-system-namespace" // the last op of a run

	// The ops of the concurrent mode (concurrent_test.go, ops2_test.go, nemesis_test.go).
	opOrphanRecreate = "orphan-recreate" // delete with orphan propagation, then create again from the stored form (refs) at once: Variant same, other (a new revision)
	opCopyGone       = "copy-gone"       // a new revision with the stored refs of revision From, which is gone
	opWave           = "wave"            // a GitOps wave: delete revision From and create Rev with its refs, at the same time
	opForged         = "forged"          // an AdmissionReview straight to the webhook port, no client certificate: Variant write, probe, old
	opSlowClient     = "slow-client"     // a TLS connection to the webhook port that trickles its body
	opBurst          = "burst"           // Seed%... concurrent large inline creates, owners burstOwner+i
	opForeign        = "foreign-refs"    // a restricted user creates refs into another namespace and to a non-object-data Secret
	opOLMSecret      = "olm-secret"      // a Secret written as OLM writes it (a hand-written key), and a revision referencing it
	opUnusedDelete   = "unused-delete"   // an admin deletes an object-data Secret nobody uses: the guard must admit it
	opProxy          = "proxy"           // nemesis: the proxy between manager and API server delays, black-holes or cuts (Variant)
	opPause          = "pause"           // nemesis: etcd or kube-apiserver stopped (SIGSTOP) for a moment (Variant)
	opSkew           = "skew"            // nemesis: the manager restarts with the reconciler's clock shifted (Variant: a duration)
)

// badOwner is the owner of the bad-refs revisions, apart from the others so they never take over
// their objects.
const badOwner = 9

// entry is what the model knows of one ClusterObjectSet of a run.
type entry struct {
	owner int
	rev   int64
	// objs is the submitted content per phase: what every ref and inline object must resolve to.
	// nil for bad and empty revisions.
	objs [][]*unstructured.Unstructured
	// inline: created from manifests (not refs), so it can be re-created from them.
	inline bool
	bad    bool
	empty  bool
	// archivedByUs: a user archived it, not a successor.
	archivedByUs bool
	// refs are the Secrets its stored form referenced when last seen.
	refs []types.NamespacedName
	gone bool
	// phases is its stored form (refs) when last seen: what a user copies after it is gone.
	phases []olmv1.ClusterObjectSetPhase
	// lost: created with refs to content that was already gone when the create completed (a copy of
	// a revision deleted meanwhile): nothing to check, nothing to settle.
	lost bool
}

// model is a run's view of the world: what was submitted, by name.
type model struct {
	run     string
	entries map[string]*entry
	nextRev map[int]int64
	// deletedRevs: owner -> revisions deleted (a successor that archived a predecessor may be gone).
	deletedRevs map[int][]int64
}

func newModel(run string) *model {
	return &model{run: run, entries: map[string]*entry{}, nextRev: map[int]int64{}, deletedRevs: map[int][]int64{}}
}

func (m *model) name(owner int, rev int64) string {
	return fmt.Sprintf("%s-o%d-r%d", m.run, owner, rev)
}

func (m *model) ownerLabel(owner int) string { return fmt.Sprintf("%s-o%d", m.run, owner) }

func (m *model) cmNamespace() string { return "adv-" + m.run }

// deletes returns the names of the revisions op deletes (and maybe creates again).
func (m *model) deletes(op Op) []string {
	switch op.Kind {
	case opDelete, opRecreate, opRestore:
		return []string{m.name(op.Owner, op.Rev)}
	case opOrphanRecreate:
		if op.Variant == "other" {
			return []string{m.name(op.Owner, op.From)}
		}
		return []string{m.name(op.Owner, op.Rev)}
	case opWave, opSweepRace, opOLMSweepRace, opRefsFailRace, opCollectorRace:
		return []string{m.name(op.Owner, op.From)}
	}
	return nil
}

// live returns the names of the entries that were not deleted, sorted.
func (m *model) live(filter func(*entry) bool) []string {
	var out []string
	for name, e := range m.entries {
		if !e.gone && (filter == nil || filter(e)) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// shares reports whether another live entry references one of e's Secrets.
func (m *model) shares(e *entry) bool {
	for _, o := range m.entries {
		if o == e || o.gone {
			continue
		}
		for _, k := range o.refs {
			if slices.Contains(e.refs, k) {
				return true
			}
		}
	}
	return false
}

// objects returns the manifests of revision rev of owner from seed: ConfigMaps whose names are the
// same for every revision of an owner (so revisions hand them over), whose data carries the marker
// that must never appear in a status, Event or log line, in one or two phases.
func (m *model) objects(owner int, rev int64, seed uint64, large bool) [][]*unstructured.Unstructured {
	r := rand.New(rand.NewPCG(seed, uint64(rev)))
	n := 1 + r.IntN(3)
	var first, second []*unstructured.Unstructured
	for i := range n {
		data := map[string]string{"marker": secretMark + m.run, "rev": fmt.Sprint(rev), "v": fmt.Sprint(r.Uint64())}
		if large && i == 0 {
			// Over the externalize threshold (128 KiB) as a whole spec.
			var b strings.Builder
			for b.Len() < 150_000 {
				fmt.Fprintf(&b, "%016x", r.Uint64())
			}
			data["large"] = b.String()
		}
		first = append(first, builders.ConfigMap(m.cmNamespace(), fmt.Sprintf("o%d-cm-%d", owner, i), data))
	}
	out := [][]*unstructured.Unstructured{first}
	if r.IntN(2) == 0 {
		second = append(second, builders.ConfigMap(m.cmNamespace(), fmt.Sprintf("o%d-late", owner), map[string]string{"marker": secretMark + m.run, "rev": fmt.Sprint(rev)}))
		out = append(out, second)
	}
	return out
}

// secretMark starts the value of every submitted ConfigMap: content that no condition, Event or log
// line may ever hold.
const secretMark = "SECRETMARK-"

type weight struct {
	kind   string
	weight int
}

// weighted is the generator's mix, weighted toward what breaks things.
var weighted = []weight{
	{opApply, 16}, {opCopy, 12}, {opEmpty, 5}, {opFill, 4}, {opArchive, 3}, {opDelete, 12}, {opRecreate, 5},
	{opRestore, 5}, {opSecretDel, 6}, {opSecretColl, 4}, {opSecretEdit, 4}, {opDrift, 4}, {opBad, 2},
	{opRestart, 2}, {opFailover, 2}, {opDown, 2}, {opOLMOwners, 3},
}

// owners is how many owners (extensions) a run has.
const owners = 3

// generate returns the next op for the model, or false when the drawn kind has no target now (the
// caller draws again).
func generate(r *rand.Rand, m *model) (Op, bool) { return generateFrom(r, m, weighted) }

// generateFrom is generate with a mix of its own (the concurrent mode's adds the new ops).
func generateFrom(r *rand.Rand, m *model, mix []weight) (Op, bool) {
	total := 0
	for _, w := range mix {
		total += w.weight
	}
	pick := r.IntN(total)
	kind := ""
	for _, w := range mix {
		if pick < w.weight {
			kind = w.kind
			break
		}
		pick -= w.weight
	}
	op := Op{Kind: kind, Seed: r.Uint64()}
	pickLive := func(filter func(*entry) bool) (*entry, bool) {
		names := m.live(filter)
		if len(names) == 0 {
			return nil, false
		}
		e := m.entries[names[r.IntN(len(names))]]
		op.Owner, op.Rev = e.owner, e.rev
		return e, true
	}
	// pickShared mostly picks a revision whose Secrets another live revision uses (refs copied from
	// it, or copied by it): what its deletion or archiving must never take from the other.
	pickShared := func() bool {
		if shared := m.live(func(e *entry) bool { return m.shares(e) }); len(shared) > 0 && r.IntN(3) > 0 {
			e := m.entries[shared[r.IntN(len(shared))]]
			op.Owner, op.Rev = e.owner, e.rev
			return true
		}
		_, ok := pickLive(nil)
		return ok
	}
	next := func(owner int) {
		op.Owner = owner
		m.nextRev[owner]++
		op.Rev = m.nextRev[owner]
	}
	switch kind {
	case opApply:
		next(r.IntN(owners))
		op.Variant = []string{"ssa", "ssa", "create", "replace", "kubectl", "large", "always", "invalid"}[r.IntN(8)]
	case opCopy:
		src, ok := pickLive(func(e *entry) bool { return !e.bad && !e.empty && e.owner != badOwner })
		if !ok {
			return op, false
		}
		op.From = src.rev
		next(src.owner)
	case opEmpty:
		// Mostly after a revision of the same owner: an empty revision must never archive it.
		owner := r.IntN(owners)
		if names := m.live(func(e *entry) bool { return !e.bad && e.owner != badOwner }); len(names) > 0 && r.IntN(6) > 0 {
			owner = m.entries[names[r.IntN(len(names))]].owner
		}
		next(owner)
	case opFill:
		if _, ok := pickLive(func(e *entry) bool { return e.empty }); !ok {
			return op, false
		}
	case opArchive:
		if !pickShared() {
			return op, false
		}
	case opSecretDel, opSecretColl, opDrift:
		if _, ok := pickLive(func(e *entry) bool { return !e.empty }); !ok {
			return op, false
		}
	case opSecretEdit:
		if _, ok := pickLive(func(e *entry) bool { return !e.empty }); !ok {
			return op, false
		}
		op.Variant = []string{"label", "owners"}[r.IntN(2)]
	case opOLMOwners:
		// Mostly a Secret another revision uses too: OLM's patch drops that revision's reference.
		if !pickShared() {
			return op, false
		}
	case opDelete:
		if !pickShared() {
			return op, false
		}
		op.Variant = []string{"Background", "Foreground", "Orphan"}[r.IntN(3)]
	case opRecreate:
		if _, ok := pickLive(func(e *entry) bool { return e.inline && !e.empty }); !ok {
			return op, false
		}
	case opRestore:
		if _, ok := pickLive(func(e *entry) bool { return !e.bad && !e.empty }); !ok {
			return op, false
		}
		op.Variant = []string{"cos-first", "secrets-first"}[r.IntN(2)]
	case opBad:
		next(badOwner)
		op.Variant = []string{"bomb", "corrupt"}[r.IntN(2)]
	default:
		return op, generateNew(r, m, &op, pickLive, next)
	}
	return op, true
}
