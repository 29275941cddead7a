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

// Error names the limit alone: Used and Need are costs of values read from Secrets, which a caller
// who cannot read them must not learn (not even by referencing one Secret many times).
func (e *BudgetError) Error() string {
	return fmt.Sprintf("the resolved content exceeds the limit of %d bytes", e.Limit)
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
// inflates, what it may inflate to), and gives it all back on Release. It never waits while it holds
// anything (see Pool): holding nothing, it waits with the context of Resolve while the Budgets of
// other requests hold the room; holding some, it takes room free at once or fails with ErrBusy, and
// its caller releases it and retries. What Reserve took is drawn first; Hold charges what is not a
// resolved value (an admission request's decoded objects).
//
// A Budget serves one reconcile or one admission request, from one goroutine (Release may be called
// from another). The objects it returns are shared between the uses of one identity: callers must not
// change them (copy first).
type Budget struct {
	limit, used int64
	memo        map[string]*resolved
	pool        *Pool

	// mu guards what is drawn from the pool: Release may come from another goroutine. held is what
	// the Budget holds of the pool, charged what of it is in use (charges and what inflating may
	// take), reserved what Reserve took (kept until Release even when not in use).
	mu                      sync.Mutex
	held, charged, reserved int64
	released                bool
	// busy: the pool refused room (ErrBusy).
	busy bool
}

// EstimateHeap is the heap that decoding raw, a JSON document, keeps: an upper bound, from one scan
// of the bytes before any is parsed (the estimate Budget charges resolved values). It is for bytes
// the caller submitted: its errors say where and why raw is not JSON, or nested deeper than the API
// server decodes.
func EstimateHeap(raw []byte) (int64, error) {
	n, err := heapEstimate(raw)
	switch {
	case errors.Is(err, errDepth):
		return 0, fmt.Errorf("JSON nested deeper than %d", maxDepth)
	case err != nil:
		return 0, errors.New("not valid JSON")
	}
	return n, nil
}

// resolved is what one identity resolved to: an object and its cost, or why not.
type resolved struct {
	obj  map[string]any
	size int64
	// decoded is the size of the JSON the value decoded to; 0 when it was not decoded.
	decoded int64
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
// (ErrBudgetExceeded) and charges nothing. With a Pool, Resolve waits with ctx for room while the
// Budget holds nothing, and takes it at once or not at all when it holds some; no room is a
// *WaitError (ErrBusy), and a later call, or a new Budget, may succeed. Errors never contain content,
// nor a value's size.
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

// Decoded returns the size of the JSON that the value Resolve resolved under id decoded to, and false
// when Resolve has not parsed it (not resolved yet, or it failed). It is for reports that show sizes
// to whoever may read the value (kubectl cos inspect), never for errors.
func (b *Budget) Decoded(id string) (int64, bool) {
	r, ok := b.memo[id]
	if !ok || r.obj == nil {
		return 0, false
	}
	return r.decoded, true
}

// Release gives what the Budget drew back to its Pool; it may be called more than once, and from
// another goroutine than Resolve's. A released Budget draws no more: its later uses fail with ErrBusy.
func (b *Budget) Release() {
	if b.pool == nil {
		return
	}
	b.mu.Lock()
	n := b.held
	b.held, b.charged, b.reserved, b.released = 0, 0, 0, true
	b.mu.Unlock()
	b.pool.release(n)
}

// Reserve takes n bytes of the Pool for this Budget at once, so that its later charges (Hold, Resolve)
// draw from the reservation first and need not take room piece by piece. Holding nothing, it waits in
// turn with ctx, taking the whole n in one grant; holding some, it takes n free at once or not at all.
// No room is a *WaitError (ErrBusy); more than the Pool's capacity too. What is reserved is kept until
// Release. Without a Pool, Reserve does nothing.
func (b *Budget) Reserve(ctx context.Context, n int64) error {
	if b.pool == nil || n <= 0 {
		return nil
	}
	if err := b.take(ctx, n, true); err != nil {
		return err
	}
	b.mu.Lock()
	b.reserved += n
	b.mu.Unlock()
	return nil
}

// Hold charges n bytes that are not a resolved value (an admission request's decoded objects) until
// Release: from the reservation first, the rest from the Pool at once. It never waits, and Used and
// Limit do not count it. No room is a *WaitError (ErrBusy), and nothing is charged.
func (b *Budget) Hold(n int64) error {
	return b.charge(context.Background(), n, false)
}

// Unhold gives back n bytes that Hold charged, once what they stood for is dropped (a Secret read and
// checked): what the Budget then holds past its reservation and its other charges goes back to the
// Pool.
func (b *Budget) Unhold(n int64) {
	b.giveBack(n)
}

// Busy reports whether the Pool refused this Budget room (ErrBusy): what it resolved or decided may
// be short of what it would have with room, and a retry may do better.
func (b *Budget) Busy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy
}

// draw charges n bytes for a value: from the reservation first, the rest from the Pool, waiting with
// ctx only when the Budget holds nothing.
func (b *Budget) draw(ctx context.Context, n int64) error {
	return b.charge(ctx, n, true)
}

// charge charges n bytes: what the Budget holds and does not use first, then the Pool, waiting with
// ctx when wait is set and the Budget holds nothing.
func (b *Budget) charge(ctx context.Context, n int64, wait bool) error {
	if b.pool == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	if b.released {
		b.mu.Unlock()
		return &WaitError{Need: n, Capacity: b.pool.capacity, Err: errReleased}
	}
	if spare := b.held - b.charged; spare >= n {
		b.charged += n
		b.mu.Unlock()
		return nil
	}
	need := n - (b.held - b.charged)
	b.mu.Unlock()
	if err := b.take(ctx, need, wait); err != nil {
		return err
	}
	b.mu.Lock()
	b.charged += n
	b.mu.Unlock()
	return nil
}

// take adds n bytes of the Pool to what the Budget holds: with wait, waiting with ctx when it holds
// nothing; otherwise at once. A refusal marks the Budget busy.
func (b *Budget) take(ctx context.Context, n int64, wait bool) error {
	b.mu.Lock()
	wait = wait && b.held == 0
	b.mu.Unlock()
	return b.added(n, b.pool.acquire(ctx, n, wait))
}

// added records n bytes that the Pool gave (err nil), or its refusal.
func (b *Budget) added(n int64, err error) error {
	b.mu.Lock()
	if err != nil {
		b.busy = b.busy || errors.Is(err, ErrBusy)
		b.mu.Unlock()
		return err
	}
	if b.released {
		// b.mu is never held while the pool's lock is taken.
		b.mu.Unlock()
		b.pool.release(n)
		return &WaitError{Need: n, Capacity: b.pool.capacity, Err: errReleased}
	}
	b.held += n
	b.mu.Unlock()
	return nil
}

// errReleased is why a released Budget draws no more.
var errReleased = errors.New("the request is over")

// giveBack uncharges n bytes; what the Budget then holds past its reservation and its charges goes
// back to the pool.
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
	b.charged -= n
	excess := b.held - max(b.charged, b.reserved)
	if excess <= 0 {
		b.mu.Unlock()
		return
	}
	b.held -= excess
	b.mu.Unlock()
	b.pool.release(excess)
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
			return &resolved{err: notObject(fmt.Sprintf("JSON nested deeper than %d", maxDepth))}, nil
		}
		return &resolved{err: notObject("not a valid JSON object")}, nil
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
	return &resolved{obj: obj, size: cost, decoded: int64(len(data))}, nil
}
