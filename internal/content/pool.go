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

// ErrBusy means that the content resolved at the same time for other ClusterObjectSets left no room
// in the process's Pool before the caller's context ended. It is not about the value: a retry may
// succeed. Pool waits that end are a *WaitError, which is ErrBusy to errors.Is.
var ErrBusy = errors.New("no room left for resolved content in this process")

// WaitError is a wait for room in a Pool that its context ended.
type WaitError struct {
	// Need is what was waited for, Capacity the pool's.
	Need, Capacity int64
	// Err is the context's error.
	Err error
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("waited for %d bytes of the %d bytes of resolved content this process holds at once: %v", e.Need, e.Capacity, e.Err)
}

// Is makes a WaitError ErrBusy.
func (e *WaitError) Is(target error) bool { return target == ErrBusy }

// Unwrap returns the context's error.
func (e *WaitError) Unwrap() error { return e.Err }

// Pool bounds the resolved content that the Budgets of one process hold at once: every charge of a
// Budget drawn from it (Pool.NewBudget) is taken from the pool first, waiting in turn (first come,
// first served) while others hold the room, and given back when the Budget is released. The webhook's
// admission requests and the reconciler draw from one Pool, so that concurrent requests cannot hold a
// budget each in memory at once. No Budget of a Pool can ask for more than its capacity, so one that
// fits its own budget always gets its room once the others are done. A Pool is safe for concurrent
// use.
type Pool struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	waiters  list.List // of *waiter, first come first
	// waiting, when set (tests), is called when a waiter queues.
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

// acquire takes n bytes, waiting for them in turn until ctx ends (a *WaitError). Room available at
// once is taken even when ctx has ended.
func (p *Pool) acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	p.mu.Lock()
	if n > p.capacity {
		p.mu.Unlock()
		return &WaitError{Need: n, Capacity: p.capacity, Err: errors.New("more than the capacity")}
	}
	if p.waiters.Len() == 0 && p.capacity-p.used >= n {
		p.used += n
		p.mu.Unlock()
		return nil
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
