package secretuse

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Progress is how long the orphan sweep has seen each object-data Secret unused (Unused), added up
// over the sweep's observations, per Secret uid. Only intervals between two observations of one
// process count, each measured on that process's own clock (monotonic where the clock is the real
// one): no time written by another process, another replica's clock or the API server's is ever
// compared with this one, so clock skew cannot shorten a grace period. The sums are what the leader
// keeps in the cluster (Encode, DecodeProgress), so a new leader carries on from them: a leader change
// costs at most the interval before it, not the whole grace period.
//
// A Secret's sum grows whether or not it is written meanwhile (another resourceVersion): no request
// can keep a Secret that nobody uses from expiring by writing it. It starts again from zero only when
// the Secret is seen used or owned (it leaves the unused set), or when it is a new Secret (another uid).
//
// A Progress is not safe for concurrent use; its zero value is ready.
type Progress struct {
	unused map[types.UID]time.Duration
	// last is this process's previous observation (zero: none yet) and seen the uids unused then.
	last time.Time
	seen map[types.UID]bool
}

// Carry takes over the sums another process kept (DecodeProgress), for the Secrets this process has
// not observed yet: a leader calls it when it starts, before its first Observe.
func (p *Progress) Carry(sums map[types.UID]time.Duration) {
	if p.unused == nil {
		p.unused = map[types.UID]time.Duration{}
	}
	for uid, d := range sums {
		if _, ok := p.unused[uid]; !ok && d > 0 {
			p.unused[uid] = d
		}
	}
}

// Observe records the Secrets seen unused at now: each one also seen unused at this process's
// previous observation gains the time since then (none when the clock went back); every other
// Secret is forgotten (a Secret used, owned or gone since starts again from zero). It returns the
// uids whose sum has reached grace, in the order given.
func (p *Progress) Observe(unused []types.UID, now time.Time, grace time.Duration) []types.UID {
	var elapsed time.Duration
	if !p.last.IsZero() && now.After(p.last) {
		elapsed = now.Sub(p.last)
	}
	sums := make(map[types.UID]time.Duration, len(unused))
	seen := make(map[types.UID]bool, len(unused))
	var due []types.UID
	for _, uid := range unused {
		if seen[uid] {
			continue
		}
		seen[uid] = true
		d := p.unused[uid]
		if p.seen[uid] {
			d += elapsed
		}
		sums[uid] = d
		if d >= grace {
			due = append(due, uid)
		}
	}
	p.unused, p.seen, p.last = sums, seen, now
	return due
}

// Unused returns how long the Secret uid has been seen unused so far (0: not seen unused).
func (p *Progress) Unused(uid types.UID) time.Duration { return p.unused[uid] }

// Seen reports whether the Secret uid was unused at the last observation.
func (p *Progress) Seen(uid types.UID) bool { return p.seen[uid] }

// Waiting is how many Secrets are seen unused and wait for their grace period to pass, or to be
// confirmed and deleted.
func (p *Progress) Waiting() int { return len(p.unused) }

// MaxProgressEntries bounds the sums Encode keeps: the longest-waiting first, about 60 bytes each,
// so the encoding stays far within the 1 MiB of a ConfigMap. A Secret left out is still swept by the
// leader that observes it; only a new leader starts it from zero.
const MaxProgressEntries = 10000

// Encode returns the sums to keep in the cluster: a JSON object of uid to whole milliseconds, at most
// MaxProgressEntries of them, the largest first.
func (p *Progress) Encode() string {
	uids := make([]types.UID, 0, len(p.unused))
	for uid, d := range p.unused {
		if d >= time.Millisecond {
			uids = append(uids, uid)
		}
	}
	slices.SortFunc(uids, func(a, b types.UID) int {
		if c := cmp.Compare(p.unused[b], p.unused[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if len(uids) > MaxProgressEntries {
		uids = uids[:MaxProgressEntries]
	}
	out := make(map[types.UID]int64, len(uids))
	for _, uid := range uids {
		out[uid] = p.unused[uid].Milliseconds()
	}
	b, _ := json.Marshal(out) // a map of strings to integers always marshals
	return string(b)
}

// DecodeProgress reads what Encode wrote. Negative or absurd values are dropped (a hand edit); an
// empty string is no sums. An error says the whole value could not be read: the caller starts from
// zero, which only delays the sweep.
func DecodeProgress(s string) (map[types.UID]time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	var in map[types.UID]int64
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, fmt.Errorf("reading the orphan sweep's progress: %w", err)
	}
	out := make(map[types.UID]time.Duration, len(in))
	for uid, ms := range in {
		// At most a year: anything longer is not a sum this sweep wrote.
		if uid != "" && ms > 0 && ms <= int64(365*24*time.Hour/time.Millisecond) {
			out[uid] = time.Duration(ms) * time.Millisecond
		}
	}
	return out, nil
}
