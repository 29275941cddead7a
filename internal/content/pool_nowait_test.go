package content

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBudgetsHoldingNeverWait is issue 27's deadlock: five Budgets of 64 (MiB, scaled to bytes) in a
// pool of 256 drew value by value until they held 255 between them; each then needed more. Each held
// what it drew while it waited for the rest, so none ever got it. Now a Budget that holds room never
// queues: each is refused at once (ErrBusy), keeps what it holds until its caller releases it, and
// the five, retried, all complete.
func TestBudgetsHoldingNeverWait(t *testing.T) {
	p := NewPool(256)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queued := 0
	p.waiting = func() { queued++; cancel() } // a holder in the queue is the deadlock: end it
	budgets := make([]*Budget, 5)
	for i := range budgets {
		budgets[i] = p.NewBudget(64)
	}
	// Round-robin, one unit at a time, as concurrent resolutions interleave: 255 of 256 held.
	for range 51 {
		for _, b := range budgets {
			if err := b.draw(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, b := range budgets {
		err := b.draw(ctx, 13) // to 64, within its own budget
		var we *WaitError
		if !errors.As(err, &we) || !errors.Is(err, ErrBusy) || !errors.Is(err, ErrNoWaitWhileHolding) || errors.Is(err, context.Canceled) {
			t.Fatalf("budget %d, holding 51: %v, want ErrBusy at once (ErrNoWaitWhileHolding)", i, err)
		}
		if !b.Busy() {
			t.Errorf("budget %d: not Busy after a refusal", i)
		}
	}
	if queued > 0 {
		t.Fatalf("%d Budgets holding room queued for more", queued)
	}
	if used := p.Used(); used != 255 {
		t.Fatalf("pool Used = %d after the refusals, want the 255 still held", used)
	}
	for _, b := range budgets {
		b.Release()
	}
	p.waiting = nil

	// Retried at once, concurrently, each from a new Budget: all five complete.
	var wg sync.WaitGroup
	retries := make([]int, 5)
	for i := range 5 {
		wg.Go(func() {
			for {
				b := p.NewBudget(64)
				err := drawAll(context.Background(), b, 64, 1)
				b.Release()
				if err == nil {
					return
				}
				if !errors.Is(err, ErrBusy) {
					t.Errorf("budget %d: %v", i, err)
					return
				}
				retries[i]++
			}
		})
	}
	wg.Wait()
	if used := p.Used(); used != 0 {
		t.Errorf("pool Used = %d after every Release, want 0", used)
	}
	t.Logf("retries per budget: %v", retries)
}

// drawAll draws total in steps of step.
func drawAll(ctx context.Context, b *Budget, total, step int64) error {
	for n := int64(0); n < total; n += step {
		if err := b.draw(ctx, min(step, total-n)); err != nil {
			return err
		}
	}
	return nil
}

// TestBudgetReserve: Reserve takes the whole cost in one wait, holding nothing; charges draw from it
// first and never wait; what is given back stays reserved until Release; past the reservation a
// Budget takes free room at once or is refused.
func TestBudgetReserve(t *testing.T) {
	type step struct {
		op      string // reserve, hold, draw, giveBack, unhold, release
		n       int64
		wantErr bool
		// after the step
		poolUsed, held, charged int64
	}
	tests := map[string]struct {
		capacity, othersHold int64
		steps                []step
	}{
		"draws come from the reservation": {100, 0, []step{
			{op: "reserve", n: 60, poolUsed: 60, held: 60},
			{op: "hold", n: 20, poolUsed: 60, held: 60, charged: 20},
			{op: "draw", n: 40, poolUsed: 60, held: 60, charged: 60},
			{op: "draw", n: 10, poolUsed: 70, held: 70, charged: 70},
			{op: "giveBack", n: 30, poolUsed: 60, held: 60, charged: 40},
			{op: "giveBack", n: 40, poolUsed: 60, held: 60, charged: 0},
			{op: "release", poolUsed: 0},
		}},
		"past the reservation, no room at once is a refusal": {100, 30, []step{
			{op: "reserve", n: 60, poolUsed: 90, held: 60},
			{op: "draw", n: 50, poolUsed: 90, held: 60, charged: 50},
			{op: "hold", n: 21, wantErr: true, poolUsed: 90, held: 60, charged: 50},
			{op: "draw", n: 20, poolUsed: 100, held: 70, charged: 70},
			{op: "draw", n: 1, wantErr: true, poolUsed: 100, held: 70, charged: 70},
			{op: "reserve", n: 1, wantErr: true, poolUsed: 100, held: 70, charged: 70},
			{op: "giveBack", n: 30, poolUsed: 90, held: 60, charged: 40},
			{op: "reserve", n: 10, poolUsed: 100, held: 70, charged: 40},
			{op: "release", poolUsed: 30},
		}},
		"hold without a reservation never waits": {100, 90, []step{
			{op: "hold", n: 11, wantErr: true, poolUsed: 90},
			{op: "hold", n: 10, poolUsed: 100, held: 10, charged: 10},
		}},
		"a read held and given back, one at a time, past the reservation": {100, 0, []step{
			{op: "reserve", n: 40, poolUsed: 40, held: 40},
			{op: "hold", n: 40, poolUsed: 40, held: 40, charged: 40},
			{op: "hold", n: 30, poolUsed: 70, held: 70, charged: 70},
			{op: "unhold", n: 30, poolUsed: 40, held: 40, charged: 40},
			{op: "hold", n: 30, poolUsed: 70, held: 70, charged: 70},
			{op: "hold", n: 31, wantErr: true, poolUsed: 70, held: 70, charged: 70},
			{op: "unhold", n: 30, poolUsed: 40, held: 40, charged: 40},
		}},
		"more than the capacity": {100, 0, []step{
			{op: "reserve", n: 101, wantErr: true},
			{op: "reserve", n: 100, poolUsed: 100, held: 100},
		}},
		"released: nothing more": {100, 0, []step{
			{op: "release"},
			{op: "reserve", n: 10, wantErr: true},
			{op: "hold", n: 10, wantErr: true},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // room that is not free at once is never waited for here
			p := NewPool(tc.capacity)
			if err := p.acquire(ctx, tc.othersHold, true); err != nil {
				t.Fatal(err)
			}
			b := p.NewBudget(tc.capacity)
			for i, s := range tc.steps {
				var err error
				switch s.op {
				case "reserve":
					err = b.Reserve(ctx, s.n)
				case "hold":
					err = b.Hold(s.n)
				case "draw":
					err = b.draw(ctx, s.n)
				case "giveBack":
					b.giveBack(s.n)
				case "unhold":
					b.Unhold(s.n)
				case "release":
					b.Release()
				}
				if (err != nil) != s.wantErr || (err != nil && !errors.Is(err, ErrBusy)) {
					t.Fatalf("step %d (%s %d): error %v, want an error (ErrBusy): %v", i, s.op, s.n, err, s.wantErr)
				}
				b.mu.Lock()
				got := []int64{p.Used(), b.held, b.charged}
				b.mu.Unlock()
				if s.op == "release" {
					got[1], got[2] = 0, 0
				}
				if diff := cmp.Diff([]int64{s.poolUsed, s.held, s.charged}, got); diff != "" {
					t.Fatalf("step %d (%s %d): pool used, held, charged (-want +got):\n%s", i, s.op, s.n, diff)
				}
			}
		})
	}
}

// TestBudgetReserveWaitsHoldingNothing: a Reserve that must wait queues in turn holding nothing,
// gets its whole amount in one grant, and its later draws do not wait.
func TestBudgetReserveWaitsHoldingNothing(t *testing.T) {
	p, queued := testPool(100)
	a := p.NewBudget(100)
	if err := a.Reserve(context.Background(), 70); err != nil {
		t.Fatal(err)
	}
	b := p.NewBudget(100)
	done := make(chan error, 1)
	go func() { done <- b.Reserve(context.Background(), 50) }()
	<-queued
	if used := p.Used(); used != 70 {
		t.Fatalf("Used = %d while b waits, want 70: b took part of its reservation", used)
	}
	a.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := drawAll(ended, b, 50, 7); err != nil {
		t.Fatalf("drawing the reservation: %v", err)
	}
	if used := p.Used(); used != 50 {
		t.Errorf("Used = %d, want 50", used)
	}
}

// TestPoolNoDeadlock runs the interleavings model (runPoolModel) over fixed seeds.
func TestPoolNoDeadlock(t *testing.T) {
	for seed := range uint64(40) {
		var buf [8]byte
		binary.LittleEndian.PutUint64(buf[:], seed*0x9e3779b97f4a7c15)
		runPoolModel(t, buf[:])
	}
}

// FuzzPoolNoDeadlock: goroutines drawing random amounts, some after a reservation, from one small
// pool, each retrying from a new Budget when refused; the seed picks the pool and the amounts, the
// scheduler the interleaving.
func FuzzPoolNoDeadlock(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte(strings.Repeat("\xff", 8)))
	f.Fuzz(runPoolModel)
}

// runPoolModel checks, while 2-6 goroutines each draw a random total in random steps (some reserving
// part of it first, some holding a part as an admission does) from a pool of 16-79 bytes, each total
// over half the pool, that:
//   - the pool never holds more than its capacity, nor more than the Budgets hold between them;
//   - no goroutine waits in the queue while its Budget holds anything;
//   - there is never a moment when every unfinished goroutine waits in the queue (a deadlock: the
//     model ends the waits and fails);
//   - every goroutine completes, and the pool is empty at the end.
func runPoolModel(t *testing.T, seed []byte) {
	var s [8]byte
	copy(s[:], seed)
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(s[:]), uint64(len(seed))))
	capacity := 16 + rng.Int64N(64)
	n := 2 + rng.IntN(5)
	type plan struct {
		total, reserve, hold int64
		steps                []int64
	}
	plans := make([]plan, n)
	for i := range plans {
		pl := plan{total: capacity/2 + rng.Int64N(capacity-capacity/2) + 1}
		if rng.IntN(3) == 0 {
			pl.reserve = rng.Int64N(pl.total + 1)
		}
		if rng.IntN(3) == 0 {
			pl.hold = rng.Int64N(pl.total + 1)
		}
		for left := pl.total - pl.hold; left > 0; {
			step := min(left, 1+rng.Int64N(max(capacity/4, 1)))
			pl.steps = append(pl.steps, step)
			left -= step
		}
		plans[i] = pl
	}

	p := NewPool(capacity)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex // guards the model's state; taken inside p.mu, never around it
		budgets  = make([]*Budget, n)
		drawing  = make([]bool, n)
		active   = n
		failures []string
	)
	fail := func(msg string) {
		failures = append(failures, msg)
		cancel()
	}
	// check runs with p.mu held.
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		var sum int64
		freeToWait := 0
		for i, b := range budgets {
			if b == nil {
				continue
			}
			b.mu.Lock()
			held := b.held
			b.mu.Unlock()
			sum += held
			if drawing[i] && held == 0 {
				freeToWait++
			}
		}
		switch q := p.waiters.Len(); {
		case p.used > p.capacity:
			fail("the pool holds more than its capacity")
		case p.used < sum:
			fail("the Budgets hold more than the pool")
		case q > freeToWait:
			fail("a Budget holding room waits in the queue")
		case q > 0 && q >= active:
			fail("every unfinished goroutine waits: deadlock")
		}
	}
	p.waiting = check

	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, pl := range plans {
		wg.Go(func() {
			<-start
			defer func() {
				p.mu.Lock()
				mu.Lock()
				active--
				budgets[i] = nil
				mu.Unlock()
				p.mu.Unlock()
				p.mu.Lock()
				check()
				p.mu.Unlock()
			}()
			for attempt := 0; ; attempt++ {
				if ctx.Err() != nil {
					return
				}
				b := p.NewBudget(capacity)
				mu.Lock()
				budgets[i], drawing[i] = b, true
				mu.Unlock()
				reserve := pl.reserve
				if attempt > 0 {
					// A retry reserves what it holds, waiting in turn holding nothing, rather than spin
					// on Hold, which never waits.
					reserve = max(reserve, pl.hold)
					runtime.Gosched()
				}
				err := b.Reserve(ctx, reserve)
				if err == nil {
					err = b.Hold(pl.hold)
				}
				for _, step := range pl.steps {
					if err != nil {
						break
					}
					err = b.draw(ctx, step)
					runtime.Gosched() // let the others draw in between
				}
				mu.Lock()
				drawing[i] = false
				mu.Unlock()
				b.Release()
				if err == nil {
					return
				}
				if !errors.Is(err, ErrBusy) {
					mu.Lock()
					fail(err.Error())
					mu.Unlock()
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("seed %x, capacity %d, plans %+v: %s", seed, capacity, plans, strings.Join(failures, "; "))
	}
	if used := p.Used(); used != 0 {
		t.Fatalf("seed %x: pool Used = %d at the end, want 0", seed, used)
	}
}
