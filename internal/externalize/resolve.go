package externalize

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
)

// Reading refs and the errors of writing Secrets, with no client: the caller passes how to get a
// Secret, so the admission pipeline (internal/admission) stays pure and objectdata supplies the client.

// GetSecretFunc reads the Secret key; a missing one is the API server's NotFound error.
type GetSecretFunc func(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error)

// SecretResolver returns a ResolveFunc that reads a ref's Secret with get (ref.namespace empty meaning
// systemNamespace) and returns the object it holds, verifying content keys. The refs resolved through
// it share a budget of maxResolvedBytes drawn from pool (content.Pool.NewBudget; nil pool: a budget of
// its own, 0 bytes: content.DefaultMaxResolvedBytes): each Secret is read once and each key decoded
// once, and every ref to it gets the same object, which callers must not change. With a pool the
// budget goes back when ctx ends, so ctx must be the request's. When ctx carries the request's own
// Budget (content.WithBudget, the webhook's), the refs draw from it instead, and pool and
// maxResolvedBytes are not used: its owner releases it. Errors name Secrets and keys, never content.
func SecretResolver(ctx context.Context, pool *content.Pool, get GetSecretFunc, systemNamespace string, maxResolvedBytes int64) ResolveFunc {
	cache := map[types.NamespacedName]*corev1.Secret{}
	budget, limit := content.BudgetFrom(ctx), "--max-concurrent-admission-bytes"
	if budget == nil {
		budget, limit = pool.NewBudget(maxResolvedBytes), "--max-concurrent-resolved-bytes"
		if pool != nil {
			context.AfterFunc(ctx, budget.Release)
		}
	}
	return func(ref olmv1.ObjectSourceRef) (map[string]any, error) {
		key := types.NamespacedName{Namespace: ref.NamespaceOr(systemNamespace), Name: ref.Name}
		sec, ok := cache[key]
		if !ok {
			var err error
			if sec, err = get(ctx, key); err != nil {
				return nil, fmt.Errorf("reading Secret %s: %w", key, err)
			}
			cache[key] = sec
		}
		data, ok := sec.Data[ref.Key]
		if !ok {
			return nil, fmt.Errorf("secret %s has no key %q", key, ref.Key)
		}
		obj, err := budget.Resolve(ctx, key.String()+"/"+ref.Key, data, ref.Key)
		switch {
		case errors.Is(err, content.ErrBudgetExceeded):
			return nil, fmt.Errorf("%w (the limit is --max-resolved-bytes)", err)
		case errors.Is(err, content.ErrBusy):
			return nil, fmt.Errorf("secret %s key %q: %w (the limit is %s)", key, ref.Key, err, limit)
		}
		if err != nil {
			return nil, fmt.Errorf("secret %s key %q: %w", key, ref.Key, err)
		}
		return obj, nil
	}
}

// WriteError is a failed Secret read or write.
type WriteError struct {
	Secret types.NamespacedName
	Err    error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("writing object-data Secret %s: %v", e.Secret, e.Err)
}

// Unwrap returns the client's error.
func (e *WriteError) Unwrap() error { return e.Err }

// ConflictError is an existing Secret under a name the plan needs that is not exactly ours.
type ConflictError struct {
	Secret types.NamespacedName
	// Why lists the reasons (Unusable), joined with ", ".
	Why string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("secret %s already exists and cannot be used: %s; delete it or rename the ClusterObjectSet", e.Secret, e.Why)
}
