package content

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
)

// DefaultMaxConcurrentResolvedBytes is the default total of resolved content that all the
// ClusterObjectSets resolved at once in one process may hold (the manager's
// --max-concurrent-resolved-bytes): four budgets of DefaultMaxResolvedBytes.
const DefaultMaxConcurrentResolvedBytes = 4 * DefaultMaxResolvedBytes

// ErrBusy means that the content resolved or admitted at the same time for other ClusterObjectSets left
// no room in the process's Pool: before the caller's context ended, or at once for a Budget that
// already held room (it never waits while holding any). It is not about the value: a retry may
// succeed. Pool refusals are a *WaitError, which is ErrBusy to errors.Is.
var ErrBusy = errors.New("no room left for resolved content in this process")

// WaitError is a Pool's refusal of room: a wait that its context ended, or a Budget that held room
// and found none free at once.
type WaitError struct {
	// Need is what was asked for, Capacity the pool's. Need is not in the message: it may be the cost
	// of a value read from a Secret.
	Need, Capacity int64
	// Err is the context's error, or why the room was not waited for.
	Err error
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("no room in the %d bytes of resolved content this process holds at once: %v", e.Capacity, e.Err)
}

// Is makes a WaitError ErrBusy.
func (e *WaitError) Is(target error) bool { return target == ErrBusy }

// Unwrap returns the context's error.
func (e *WaitError) Unwrap() error { return e.Err }

// ErrNoWaitWhileHolding is why a Budget that holds room is refused at once: waiting while holding is
// how concurrent Budgets deadlocked (each held part of the pool and waited for the rest). Its caller
// gives back what it holds and retries.
var ErrNoWaitWhileHolding = errors.New("a request holding room does not wait for more; it gives it back and is retried")

// Pool bounds the memory that the Budgets of one process hold at once: every charge of a Budget drawn
// from it (Pool.NewBudget) is taken from the pool first and given back when the Budget is released.
// The webhook's admission requests draw from one Pool, the reconciler from another, so that
// admissions never hold up a reconcile or a teardown.
//
// No hold-and-wait: only a Budget that holds nothing waits for room, in turn (first come, first
// served) until its context ends; a Budget that holds room takes more only when it is free at once,
// and is refused with ErrBusy otherwise (ErrNoWaitWhileHolding), so that it gives back what it holds
// and is retried. Budgets that know their cost take it whole in one wait (Budget.Reserve). So the
// room of a Pool is held only by Budgets that are running, never by one that waits, and every waiter
// gets its room once those ahead of it are done: concurrent Budgets cannot deadlock. A Budget that
// holds room may take free room ahead of the waiters; it delays them, but only by what the Budgets
// already holding when they queued take (no Budget starts holding past a waiter). No Budget of a Pool
// can ask for more than its capacity. A Pool is safe for concurrent use.
type Pool struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	waiters  list.List // of *waiter, first come first
	// waiting, when set (tests), is called when a waiter queues, with mu held.
	waiting func()
}

// waiter is one acquire waiting for room: ready is closed once n is taken for it.
type waiter struct {
	n     int64
	ready chan struct{}
}

// NewPool returns a Pool of capacity bytes; capacity <= 0 means DefaultMaxConcurrentResolvedBytes.
func NewPool(capacity int64) *Pool {
	if capacity <= 0 {
		capacity = DefaultMaxConcurrentResolvedBytes
	}
	return &Pool{capacity: capacity}
}

// NewBudget returns a Budget of limit bytes (see NewBudget) that draws what it charges from p; the
// limit is at most p's capacity. Call Budget.Release when its objects are no longer used. A nil Pool
// gives a Budget that draws from none.
func (p *Pool) NewBudget(limit int64) *Budget {
	b := NewBudget(limit)
	if p != nil {
		b.pool = p
		b.limit = min(b.limit, p.capacity)
	}
	return b
}

// Capacity is the pool's total in bytes.
func (p *Pool) Capacity() int64 { return p.capacity }

// Used is what the pool's Budgets hold now.
func (p *Pool) Used() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// errOverCapacity is why a request for more than the whole pool is refused at once.
var errOverCapacity = errors.New("more than the capacity")

// acquire takes n bytes. With wait (only for a Budget that holds nothing), it waits for them in turn
// until ctx ends (a *WaitError); room available at once is taken even when ctx has ended. Without, it
// takes room free at once, even ahead of waiters, or is refused (ErrNoWaitWhileHolding).
func (p *Pool) acquire(ctx context.Context, n int64, wait bool) error {
	if n <= 0 {
		return nil
	}
	p.mu.Lock()
	if n > p.capacity {
		p.mu.Unlock()
		return &WaitError{Need: n, Capacity: p.capacity, Err: errOverCapacity}
	}
	if (!wait || p.waiters.Len() == 0) && p.capacity-p.used >= n {
		p.used += n
		p.mu.Unlock()
		return nil
	}
	if !wait {
		p.mu.Unlock()
		return &WaitError{Need: n, Capacity: p.capacity, Err: ErrNoWaitWhileHolding}
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	elem := p.waiters.PushBack(w)
	if p.waiting != nil {
		p.waiting()
	}
	p.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-w.ready:
		// Granted as the context ended: give it back.
		p.used -= n
	default:
		p.waiters.Remove(elem)
	}
	// Either way, those behind may fit now.
	p.grant()
	return &WaitError{Need: n, Capacity: p.capacity, Err: context.Cause(ctx)}
}

// release gives n bytes back.
func (p *Pool) release(n int64) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used -= n
	p.grant()
}

// grant takes room for the waiters at the front of the queue that fit, in order; p.mu is held.
func (p *Pool) grant() {
	for e := p.waiters.Front(); e != nil; e = p.waiters.Front() {
		w := e.Value.(*waiter)
		if p.capacity-p.used < w.n {
			return
		}
		p.used += w.n
		p.waiters.Remove(e)
		close(w.ready)
	}
}
