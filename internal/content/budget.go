package content

import (
	"errors"
	"fmt"
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
	// Need is the value's decoded size; 0 when inflating stopped at what was left (Limit-Used).
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

// Budget resolves the stored values behind the refs of one ClusterObjectSet against a cap on their
// total size, so that many refs to one small gzip bomb cannot inflate without bound. Every use of a
// value is charged its decoded size (each use is digested, copied and applied downstream), but each
// value is read, verified and decoded only once: the object is kept and handed to every later use
// under the same identity. No value is ever inflated past what the budget has left.
//
// A Budget serves one reconcile or one admission request, from one goroutine. The objects it returns
// are shared between the uses of one identity: callers must not change them (copy first).
type Budget struct {
	limit, used int64
	memo        map[string]*resolved
}

// resolved is what one identity resolved to: an object and its decoded size, or why not.
type resolved struct {
	obj  map[string]any
	size int64
	// err is a failure that no later use can change (corrupt, digest mismatch, too large on its own).
	err error
	// over: inflating stopped at what the budget had left, which only shrinks.
	over bool
}

// NewBudget returns a Budget of limit bytes in all; limit <= 0 means DefaultMaxResolvedBytes.
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
// function Resolve), and charges its decoded size. id names the value, such as
// "namespace/name/key" of its Secret: the same id must always be given the same stored bytes, and
// the first call's result is reused for every later call with that id. The per-value limit is
// MaxDecompressedSize or what the budget has left, whichever is smaller. A use that does not fit is
// a *BudgetError (ErrBudgetExceeded) and charges nothing. Errors never contain content.
func (b *Budget) Resolve(id string, stored []byte, key string) (map[string]any, error) {
	r, ok := b.memo[id]
	if !ok {
		r = b.decode(stored, key)
		b.memo[id] = r
	}
	switch {
	case r.err != nil:
		return nil, r.err
	case r.over:
		return nil, &BudgetError{Limit: b.limit, Used: b.used}
	case r.size > b.limit-b.used:
		return nil, &BudgetError{Limit: b.limit, Used: b.used, Need: r.size}
	}
	b.used += r.size
	return r.obj, nil
}

// decode verifies and decodes one value, inflating no further than the budget has left.
func (b *Budget) decode(stored []byte, key string) *resolved {
	if err := verifyKey(stored, key); err != nil {
		return &resolved{err: err}
	}
	left := b.limit - b.used
	if left <= 0 {
		// Decode would read a limit of 0 as the default; and no JSON object has 0 bytes.
		return &resolved{over: true}
	}
	limit := min(int64(MaxDecompressedSize), left)
	data, err := Decode(stored, limit)
	if err != nil {
		if errors.Is(err, ErrTooLarge) && limit < MaxDecompressedSize {
			return &resolved{over: true}
		}
		return &resolved{err: err}
	}
	obj, err := parseObject(data)
	if err != nil {
		return &resolved{err: err}
	}
	return &resolved{obj: obj, size: int64(len(data))}
}
