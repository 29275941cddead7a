package secretdata

import (
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

// ResolveMemory bounds the memory that resolving refs holds: the one value that carries the bounds
// from the flags to every resolver that draws a budget of its own (the reconciler, kubectl cos). An
// admission request of the webhook draws from its own Budget instead (RequestResolver).
type ResolveMemory struct {
	// MaxResolvedBytes caps the resolved content of the refs of one ClusterObjectSet
	// (--max-resolved-bytes); 0 or less means content.DefaultMaxResolvedBytes.
	MaxResolvedBytes int64
	// Pool, when set, bounds the resolved content that all the resolutions of this process hold at
	// once (--max-concurrent-resolved-bytes); nil: no such bound.
	Pool *content.Pool
}

// NewBudget returns the budget of one resolution: MaxResolvedBytes, drawn from Pool when it is set.
// Its owner releases it (content.Budget.Release) once the resolved objects are no longer used.
func (m ResolveMemory) NewBudget() *content.Budget {
	return m.Pool.NewBudget(m.MaxResolvedBytes)
}

// WithPool returns m drawing from pool.
func (m ResolveMemory) WithPool(pool *content.Pool) ResolveMemory {
	m.Pool = pool
	return m
}

// ReadCost is what reading one Secret may hold until it is dropped: the API server's response (the
// stored object, at most etcd's 1.5 MiB request limit; a Secret's data is at most 1 MiB, base64 in
// JSON) and the Secret decoded from it, at once. The admission pipeline charges it to the request's
// Budget (content.Budget.Hold) before each read, as the size of a Secret is not known before it is
// read.
const ReadCost = 3 << 20
