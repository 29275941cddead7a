package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
)

// The Secret guard's reads, bounded per request whatever the request carries.
const (
	// maxCandidateGets is how many candidate ClusterObjectSets the guard reads one by one (uncached
	// GETs); with more candidates it lists them all once instead.
	maxCandidateGets = 8
	// listPageSize is the page of the guard's uncached List of ClusterObjectSets: it bounds the
	// memory of one page (a stored ClusterObjectSet is at most ~1.5 MiB), not the reads.
	listPageSize = 50
	// confirmTimeout bounds one coalesced List: the guard's webhook timeout.
	confirmTimeout = 10 * time.Second
)

// guardCandidates returns the names of the ClusterObjectSets that may use a Secret: those the cache
// says reference it, the one its revision-name label names (unless the label holds a hash of a name
// too long for a label value), and those its ownerReferences name, each once, in that order. many
// reports more than k of them (the list is then cut short): the caller lists every ClusterObjectSet
// instead of reading them one by one.
func guardCandidates(referrers []string, label string, owners []metav1.OwnerReference, k int) (names []string, many bool) {
	seen := map[string]bool{}
	add := func(name string) bool {
		if name == "" || seen[name] {
			return true
		}
		if len(names) == k {
			return false
		}
		seen[name] = true
		names = append(names, name)
		return true
	}
	for _, name := range referrers {
		if !add(name) {
			return nil, true
		}
	}
	if naming.RevisionLabelValue(label) == label && !add(label) {
		return nil, true
	}
	for _, ref := range owners {
		if collision.IsClusterObjectSetRef(ref) && !add(ref.Name) {
			return nil, true
		}
	}
	return names, false
}

// listUsersOf lists every ClusterObjectSet with reader (uncached), a page at a time, and returns the
// users (secretuse.BySecret) of the Secrets keys, sorted by name.
func listUsersOf(ctx context.Context, reader client.Reader, keys map[types.NamespacedName]bool, systemNamespace string) (map[types.NamespacedName][]secretuse.Use, error) {
	out := map[types.NamespacedName][]secretuse.Use{}
	cont := ""
	for {
		list := &olmv1.ClusterObjectSetList{}
		if err := reader.List(ctx, list, client.Limit(listPageSize), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("listing ClusterObjectSets: %w", err)
		}
		for key, users := range secretuse.BySecret(list.Items, systemNamespace) {
			if keys[key] {
				out[key] = append(out[key], users...)
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	for _, users := range out {
		slices.SortFunc(users, func(a, b secretuse.Use) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// usersFunc answers, from one read of the cluster, the users of each Secret of keys.
type usersFunc func(ctx context.Context, keys map[types.NamespacedName]bool) (map[types.NamespacedName][]secretuse.Use, error)

// coalescedList shares one uncached List among the requests that need one, and never answers a
// request with a List that began before the request asked: such a List may miss a ClusterObjectSet
// created just before the request. One List runs at a time; the requests that ask meanwhile join the
// next one, which starts once the running one has ended and a pause has passed (listPause: as long
// as the last List took, at least minListPause and at most maxListPause), and answers them all. So a
// replica starts at most one List per minListPause and spends at most about half of its time listing,
// however many reviews come and however they trickle in (one List per review when each came just
// after the last List began: 50 concurrent reviews made 28 Lists); a review waits at most the List
// running when it asks, a pause and its own List. Its zero value is ready.
type coalescedList struct {
	// clock times the pauses; nil: the real clock.
	clock clock.Clock

	mu sync.Mutex
	// pending is the next List: requests join it until it starts.
	pending *listCall
	// active: a runner goroutine runs or pauses (run); a request that finds none starts one.
	active bool
	// next is when the next List may start.
	next time.Time
	// joined, when set, is called once a request has joined a call (tests); started: it started the
	// runner.
	joined func(key types.NamespacedName, started bool)
}

// The pause between two uncached Lists of one replica (coalescedList).
const (
	minListPause = 250 * time.Millisecond
	maxListPause = time.Second
)

type listCall struct {
	keys  map[types.NamespacedName]bool // frozen once the call starts
	done  chan struct{}
	users map[types.NamespacedName][]secretuse.Use
	err   error
}

// Do returns the users of the Secrets of the List that answers the request for key: one that starts
// after Do was called. The List runs on a context of its own (confirmTimeout), so that a request
// that gives up does not fail the others; Do returns when ctx ends first.
func (c *coalescedList) Do(ctx context.Context, key types.NamespacedName, users usersFunc) (map[types.NamespacedName][]secretuse.Use, error) {
	c.mu.Lock()
	if c.pending == nil {
		c.pending = &listCall{keys: map[types.NamespacedName]bool{}, done: make(chan struct{})}
	}
	call := c.pending
	call.keys[key] = true
	start := !c.active
	c.active = true
	joined := c.joined
	c.mu.Unlock()
	if joined != nil {
		joined(key, start)
	}
	if start {
		go c.run(context.WithoutCancel(ctx), users)
	}
	select {
	case <-call.done:
		return call.users, call.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the list of ClusterObjectSets: %w", ctx.Err())
	}
}

// run runs the pending calls one after another, each once its pause has passed, until none is
// pending.
func (c *coalescedList) run(ctx context.Context, users usersFunc) {
	clk := c.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	for {
		c.mu.Lock()
		if c.pending == nil {
			c.active = false
			c.mu.Unlock()
			return
		}
		wait := c.next.Sub(clk.Now())
		c.mu.Unlock()
		if wait > 0 {
			<-clk.After(wait) // requests keep joining the pending call
		}
		c.mu.Lock()
		call := c.pending
		c.pending = nil
		c.mu.Unlock()
		start := clk.Now()
		lctx, cancel := context.WithTimeout(ctx, confirmTimeout)
		call.users, call.err = users(lctx, call.keys)
		cancel()
		end := clk.Now()
		c.mu.Lock()
		c.next = end.Add(listPause(end.Sub(start)))
		c.mu.Unlock()
		close(call.done)
	}
}

// listPause is the pause after a List that took took.
func listPause(took time.Duration) time.Duration {
	return min(max(took, minListPause), maxListPause)
}
