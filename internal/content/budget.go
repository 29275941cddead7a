package content

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// DefaultMaxResolvedBytes is the default total of resolved content one ClusterObjectSet may hold
// (the manager's --max-resolved-bytes).
const DefaultMaxResolvedBytes = 64 << 20

// ErrBudgetExceeded means the values resolved for one ClusterObjectSet add up to more than its
// budget. Budget errors are a *BudgetError, which is both ErrBudgetExceeded and ErrTooLarge to
// errors.Is.
var ErrBudgetExceeded = errors.New("the total resolved content exceeds the budget")

// BudgetError is a use of a value that the budget has no room left for.
type BudgetError struct {
	// Limit is the budget, Used what was charged before this use.
	Limit, Used int64
	// Need is the value's cost; 0 when inflating stopped at what was left (Limit-Used).
	Need int64
}

func (e *BudgetError) Error() string {
	if e.Need == 0 {
		return fmt.Sprintf("the resolved content exceeds the limit of %d bytes: %d bytes used, the next value is larger than the %d left", e.Limit, e.Used, e.Limit-e.Used)
	}
	return fmt.Sprintf("the resolved content exceeds the limit of %d bytes: %d bytes used, the next value needs %d", e.Limit, e.Used, e.Need)
}

// Is makes a BudgetError both ErrBudgetExceeded and ErrTooLarge.
func (e *BudgetError) Is(target error) bool {
	return target == ErrBudgetExceeded || target == ErrTooLarge
}

// Budget resolves the stored values behind the refs of one ClusterObjectSet against a cap on what
// they cost, so that many refs to one small gzip bomb, or a few to a bomb of tiny containers, cannot
// take memory without bound. A value's cost is the larger of its decoded size and the heap its
// object keeps (heapEstimate: a scan of the JSON, before it is parsed; `[{},{},...]` keeps 27 times
// its size). Every use of a value is charged its cost (each use is digested, copied and applied
// downstream), but each value is read, verified, estimated and parsed only once: the object is kept
// and handed to every later use under the same identity. No value is inflated past what the budget
// has left, nor parsed when its cost does not fit.
//
// A Budget of a Pool (Pool.NewBudget) takes each charge from the pool first (and, while a gzip value
// inflates, what it may inflate to), waiting with the context of Resolve while the Budgets of other
// requests hold the room, and gives it all back on Release.
//
// A Budget serves one reconcile or one admission request, from one goroutine (Release may be called
// from another). The objects it returns are shared between the uses of one identity: callers must not
// change them (copy first).
type Budget struct {
	limit, used int64
	memo        map[string]*resolved
	pool        *Pool

	// mu guards what is drawn from the pool: Release may come from another goroutine.
	mu       sync.Mutex
	held     int64
	released bool
}

// resolved is what one identity resolved to: an object and its cost, or why not.
type resolved struct {
	obj  map[string]any
	size int64
	// err is a failure that no later use can change (corrupt, digest mismatch, too large on its own).
	err error
	// over: inflating stopped at what the budget had left, which only shrinks. A value whose cost
	// is known but did not fit has a size and no object.
	over bool
}

// NewBudget returns a Budget of limit bytes in all that draws from no Pool; limit <= 0 means
// DefaultMaxResolvedBytes.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		limit = DefaultMaxResolvedBytes
	}
	return &Budget{limit: limit, memo: map[string]*resolved{}}
}

// Limit is the budget's total in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Used is the bytes charged so far: never more than Limit.
func (b *Budget) Used() int64 { return b.used }

// Resolve returns the object held by stored, as Secret data under key holds it (see the package
// function Resolve), and charges its cost. id names the value, such as "namespace/name/key" of its
// Secret: the same id must always be given the same stored bytes, and the first call's result is
// reused for every later call with that id. The per-value limit is MaxDecompressedSize or what the
// budget has left, whichever is smaller. A use that does not fit is a *BudgetError
// (ErrBudgetExceeded) and charges nothing. With a Pool, Resolve waits with ctx for room; when ctx
// ends first, a *WaitError (ErrBusy), and a later call may succeed. Errors never contain content.
func (b *Budget) Resolve(ctx context.Context, id string, stored []byte, key string) (map[string]any, error) {
	r, ok := b.memo[id]
	drawn := false
	if !ok {
		var err error
		if r, err = b.decode(ctx, stored, key); err != nil {
			return nil, err
		}
		b.memo[id] = r
		// A new object's cost was drawn before parsing it.
		drawn = r.obj != nil
	}
	switch {
	case r.err != nil:
		return nil, r.err
	case r.over:
		return nil, &BudgetError{Limit: b.limit, Used: b.used}
	case r.obj == nil || r.size > b.limit-b.used:
		return nil, &BudgetError{Limit: b.limit, Used: b.used, Need: r.size}
	}
	if !drawn {
		if err := b.draw(ctx, r.size); err != nil {
			return nil, err
		}
	}
	b.used += r.size
	return r.obj, nil
}

// Release gives what the Budget drew back to its Pool; it may be called more than once, and from
// another goroutine than Resolve's. A released Budget draws no more: its later uses fail with ErrBusy.
func (b *Budget) Release() {
	if b.pool == nil {
		return
	}
	b.mu.Lock()
	n := b.held
	b.held, b.released = 0, true
	b.mu.Unlock()
	b.pool.release(n)
}

// draw takes n bytes from the pool, if any, for this Budget.
func (b *Budget) draw(ctx context.Context, n int64) error {
	if b.pool == nil || n <= 0 {
		return nil
	}
	if err := b.pool.acquire(ctx, n); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released {
		b.pool.release(n)
		return &WaitError{Need: n, Capacity: b.pool.capacity, Err: errReleased}
	}
	b.held += n
	return nil
}

// errReleased is why a released Budget draws no more.
var errReleased = errors.New("the request is over")

// giveBack returns n bytes drawn for this Budget to the pool, if any.
func (b *Budget) giveBack(n int64) {
	if b.pool == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	if b.released {
		// Release gave it all back already.
		b.mu.Unlock()
		return
	}
	b.held -= n
	b.mu.Unlock()
	b.pool.release(n)
}

// maxGzipRatio bounds how much gzip inflates: deflate encodes at most 258 bytes in 2 bits.
const maxGzipRatio = 1032

// decode verifies, inflates, estimates and parses one value, inflating no further than the budget
// has left and parsing only when its cost fits. With a Pool, what inflating may take is drawn first,
// then exchanged for the cost; the cost of a parsed object stays drawn (for its first use). The error
// is a wait for the pool that ended (nothing is kept, nothing stays drawn); anything else about the
// value is in the result.
func (b *Budget) decode(ctx context.Context, stored []byte, key string) (*resolved, error) {
	if err := verifyKey(stored, key); err != nil {
		return &resolved{err: err}, nil //nolint:nilerr // a bad value is a result; the error is the pool's wait
	}
	left := b.limit - b.used
	if left <= 0 {
		// Decode would read a limit of 0 as the default; and no JSON object has 0 bytes.
		return &resolved{over: true}, nil
	}
	limit := min(int64(MaxDecompressedSize), left)
	var inflating int64
	if IsGzip(stored) {
		inflating = min(limit, maxGzipRatio*int64(len(stored)))
	}
	if err := b.draw(ctx, inflating); err != nil {
		return nil, err
	}
	data, err := Decode(stored, limit)
	if err != nil {
		b.giveBack(inflating)
		if errors.Is(err, ErrTooLarge) && limit < MaxDecompressedSize {
			return &resolved{over: true}, nil
		}
		return &resolved{err: err}, nil
	}
	est, err := heapEstimate(data)
	if err != nil {
		b.giveBack(inflating)
		if errors.Is(err, errDepth) {
			return &resolved{err: fmt.Errorf("%w: JSON nested deeper than %d (%d bytes)", ErrCorrupt, maxDepth, len(data))}, nil
		}
		return &resolved{err: fmt.Errorf("%w: not a valid JSON object (%d bytes)", ErrCorrupt, len(data))}, nil
	}
	cost := max(int64(len(data)), est)
	if cost > left {
		b.giveBack(inflating)
		return &resolved{size: cost}, nil
	}
	if cost > inflating {
		if err := b.draw(ctx, cost-inflating); err != nil {
			b.giveBack(inflating)
			return nil, err
		}
	} else {
		b.giveBack(inflating - cost)
	}
	obj, err := parseObject(data)
	if err != nil {
		b.giveBack(cost)
		return &resolved{err: err}, nil //nolint:nilerr // a bad value is a result; the error is the pool's wait
	}
	return &resolved{obj: obj, size: cost}, nil
}
