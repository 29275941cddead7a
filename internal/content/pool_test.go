package content

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestBudgetContainerBomb: six values of about 10 KB of gzip, with valid content keys, each inflating
// to 3.5 million empty objects (`[{},{},...]`, 10 MiB of JSON that parses into some 280 MB of
// heap; the six held 1.6 GB before the estimate). Each is refused by the default budget after a
// scan, before it is parsed: resolving all six allocates a few dozen times, where parsing one would
// allocate millions of times.
func TestBudgetContainerBomb(t *testing.T) {
	ctx := context.Background()
	values := containerBombs(t, 6)
	b := NewBudget(0)
	for i, v := range values {
		if len(v) > 12_000 {
			t.Fatalf("value %d: %d bytes of gzip, want about 10 KB", i, len(v))
		}
		_, err := b.Resolve(ctx, "olmv1-system/bomb/"+Key(v), v, Key(v))
		var be *BudgetError
		if !errors.As(err, &be) || be.Need <= DefaultMaxResolvedBytes || be.Used != 0 {
			t.Fatalf("value %d: %v, want a BudgetError needing more than the whole budget", i, err)
		}
	}
	if b.Used() != 0 {
		t.Errorf("Used = %d, want 0", b.Used())
	}
	allocs := testing.AllocsPerRun(1, func() {
		b := NewBudget(0)
		for i, v := range values {
			if _, err := b.Resolve(ctx, fmt.Sprint(i), v, Key(v)); !errors.Is(err, ErrBudgetExceeded) {
				t.Fatalf("value %d: %v, want ErrBudgetExceeded", i, err)
			}
		}
	})
	if allocs > 1000 {
		t.Errorf("resolving the six values allocates %.0f times: they were parsed", allocs)
	}
}

// testPool is a Pool that reports on queued when a waiter queues.
func testPool(capacity int64) (*Pool, chan struct{}) {
	p := NewPool(capacity)
	queued := make(chan struct{}, 10)
	p.waiting = func() { queued <- struct{}{} }
	return p, queued
}

// acquireAsync acquires n in a goroutine, after which the result comes on the returned channel.
func acquireAsync(ctx context.Context, p *Pool, n int64) chan error {
	done := make(chan error, 1)
	go func() { done <- p.acquire(ctx, n, true) }()
	return done
}

// TestPoolFirstComeFirstServed: waiters get room in the order they came, and one that fits does not
// pass one waiting before it.
func TestPoolFirstComeFirstServed(t *testing.T) {
	ctx := context.Background()
	p, queued := testPool(100)
	if err := p.acquire(ctx, 60, true); err != nil {
		t.Fatal(err)
	}
	big := acquireAsync(ctx, p, 60)
	<-queued
	small := acquireAsync(ctx, p, 30) // 40 are free, but big came first
	<-queued
	if used := p.Used(); used != 60 {
		t.Fatalf("Used = %d while both wait, want 60", used)
	}
	select {
	case err := <-small:
		t.Fatalf("the later, smaller waiter got room first (%v)", err)
	default:
	}
	p.release(60)
	if err := <-big; err != nil {
		t.Fatal(err)
	}
	if err := <-small; err != nil {
		t.Fatal(err)
	}
	if used := p.Used(); used != 90 {
		t.Errorf("Used = %d, want 90", used)
	}
}

// TestPoolWaitEnds: a wait whose context ends fails with ErrBusy and takes nothing, and lets those
// behind it have the room it was holding up.
func TestPoolWaitEnds(t *testing.T) {
	p, queued := testPool(100)
	if err := p.acquire(context.Background(), 80, true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	head := acquireAsync(ctx, p, 50)
	<-queued
	behind := acquireAsync(context.Background(), p, 10)
	<-queued
	cancel()
	err := <-head
	var we *WaitError
	if !errors.As(err, &we) || *we != (WaitError{Need: 50, Capacity: 100, Err: context.Canceled}) ||
		!errors.Is(err, ErrBusy) || !errors.Is(err, context.Canceled) || errors.Is(err, ErrTooLarge) {
		t.Fatalf("error %#v, want a WaitError of 50 that is ErrBusy and context.Canceled", err)
	}
	if want := "no room in the 100 bytes of resolved content this process holds at once: context canceled"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if err := <-behind; err != nil {
		t.Fatal(err)
	}
	if used := p.Used(); used != 90 {
		t.Errorf("Used = %d, want 90", used)
	}
	if err := p.acquire(context.Background(), 101, true); !errors.Is(err, ErrBusy) {
		t.Errorf("acquiring more than the capacity: %v, want ErrBusy at once", err)
	}
}

// TestBudgetPool: Budgets drawn from one Pool take every charge from it, wait for room that other
// Budgets hold (with the context of Resolve: an ended one fails at once, retriably), get it when
// those are released, and never wait when there is room, even with an ended context.
func TestBudgetPool(t *testing.T) {
	small := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`)
	zipped := gzipBest(t, small)
	cost := costOf(t, small)
	p, queued := testPool(3 * cost)
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	// Alone, a Budget as large as the pool gets all of it without waiting.
	a := p.NewBudget(DefaultMaxResolvedBytes)
	if a.Limit() != 3*cost {
		t.Fatalf("Limit = %d, want the pool's %d", a.Limit(), 3*cost)
	}
	for i := range 3 {
		if _, err := a.Resolve(ended, "ns/s/z", zipped, Key(zipped)); err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
	}
	if _, err := a.Resolve(ended, "ns/s/z", zipped, Key(zipped)); !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("a fourth use: %v, want ErrBudgetExceeded", err)
	}
	if used := p.Used(); used != 3*cost {
		t.Fatalf("pool Used = %d, want %d", used, 3*cost)
	}

	// Another waits until the first is released.
	b := p.NewBudget(0)
	done := make(chan error, 1)
	go func() {
		_, err := b.Resolve(context.Background(), "ns/s/a", small, "a")
		done <- err
	}()
	<-queued
	a.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if used := p.Used(); used != cost {
		t.Fatalf("pool Used = %d, want %d", used, cost)
	}
	for range 2 {
		if _, err := b.Resolve(ended, "ns/s/a", small, "a"); err != nil {
			t.Fatal(err)
		}
	}

	// The pool is full: a wait with an ended context fails at once, charges nothing, keeps nothing.
	c := p.NewBudget(0)
	_, err := c.Resolve(ended, "ns/s/z", zipped, Key(zipped))
	if !errors.Is(err, ErrBusy) || !errors.Is(err, context.Canceled) || errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("error %v, want ErrBusy", err)
	}
	if c.Used() != 0 || p.Used() != 3*cost {
		t.Fatalf("Used %d, pool %d after a failed wait; want 0 and %d", c.Used(), p.Used(), 3*cost)
	}
	<-queued
	b.Release()
	b.Release()
	if _, err := c.Resolve(ended, "ns/s/z", zipped, Key(zipped)); err != nil {
		t.Fatalf("retried: %v", err)
	}
	if used := p.Used(); used != cost {
		t.Errorf("pool Used = %d, want %d", used, cost)
	}
	c.Release()
	if used := p.Used(); used != 0 {
		t.Errorf("pool Used = %d after every Release, want 0", used)
	}
	if _, err := c.Resolve(ended, "ns/s/z", zipped, Key(zipped)); !errors.Is(err, ErrBusy) {
		t.Fatalf("a released Budget: %v, want ErrBusy", err)
	}
	if used := p.Used(); used != 0 {
		t.Errorf("pool Used = %d after a released Budget's use, want 0", used)
	}
}

// TestBudgetPoolRefusals: what a Budget refuses (too large for it, corrupt) leaves nothing drawn.
func TestBudgetPoolRefusals(t *testing.T) {
	ctx := context.Background()
	p := NewPool(DefaultMaxResolvedBytes)
	b := p.NewBudget(0)
	bombs := containerBombs(t, 1)
	bombed, _ := bomb(t)
	corrupt := []byte(`{"apiVersion":"v1","kind":` + strings.Repeat("[", 20))
	for name, v := range map[string][]byte{"container bomb": bombs[0], "corrupt": corrupt, "deep": []byte(`{"a":` + nest(maxDepth) + `}`)} {
		if _, err := b.Resolve(ctx, name, v, "k"); err == nil {
			t.Fatalf("%s: resolved", name)
		}
		if used := p.Used(); used != 0 {
			t.Fatalf("%s: pool Used = %d, want 0", name, used)
		}
	}
	// Six of ten MiB fit; the seventh inflates no further than what is left, and is refused.
	for i := range 7 {
		_, err := b.Resolve(ctx, "bomb", bombed, Key(bombed))
		if (i < 6) != (err == nil) {
			t.Fatalf("use %d: %v", i, err)
		}
	}
	if p.Used() != b.Used() {
		t.Errorf("pool Used = %d, Budget Used %d", p.Used(), b.Used())
	}
	b.Release()
	if used := p.Used(); used != 0 {
		t.Errorf("pool Used = %d after Release, want 0", used)
	}
}
