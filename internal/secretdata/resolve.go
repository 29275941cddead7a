package secretdata

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

// GetSecretFunc reads the Secret key; a missing one is the API server's NotFound error.
type GetSecretFunc func(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error)

// ResolveFunc returns the object a ref points at.
type ResolveFunc func(ref olmv1.ObjectSourceRef) (map[string]any, error)

// Flags named by a Busy failure: the pool the budget draws from.
const (
	// ResolvedPoolFlag bounds the pool of ResolveMemory.Pool.
	ResolvedPoolFlag = "--max-concurrent-resolved-bytes"
	// AdmissionPoolFlag bounds the pool of the webhook's requests (RequestResolver's Budget).
	AdmissionPoolFlag = "--max-concurrent-admission-bytes"
)

// Config configures a Resolver.
type Config struct {
	// Get reads a Secret; the Resolver calls it once per Secret.
	Get GetSecretFunc
	// SystemNamespace is what an empty ref.namespace means.
	SystemNamespace string
	// Budget is what every resolved value is charged to (content.Budget); its owner releases it.
	Budget *content.Budget
	// WaitContext, when set, is the context the Budget waits with for room in its pool, in place of
	// the context of each call (which still reads the Secrets).
	WaitContext context.Context
	// RequireImmutable refuses refs to a Secret that is not immutable (NotImmutable), as upstream's
	// reconciler does.
	RequireImmutable bool
	// BusyFlag is the flag a Busy failure names; empty: ResolvedPoolFlag.
	BusyFlag string
	// ChargeReads charges every Secret read to Budget (content.Budget.Hold): ReadCost before the
	// read, then what the Secret read holds while the Resolver keeps it (an admission request's
	// Budget, RequestResolver). No room is a Busy failure, and the Secret is not read.
	ChargeReads bool
}

// Resolver reads refs out of Secrets for one resolution (one reconcile, one admission request, one
// kubectl cos command): each Secret is read once (its failure too) and kept for the resolution
// (charged to the Budget with ChargeReads), each key is verified and decoded
// once under the one budget (content.Budget), and every ref to a key gets the same object, which
// callers must not change. Failures are *Failure. A Resolver serves one goroutine.
type Resolver struct {
	c       Config
	secrets map[types.NamespacedName]secretRead
}

type secretRead struct {
	secret *corev1.Secret
	err    *Failure
}

// Value is what a ref resolved to, with the sizes a report may show to whoever may read the Secret.
type Value struct {
	// Object is the Kubernetes object the ref holds; nil when it did not resolve.
	Object map[string]any
	// Stored is the size of the stored value and Gzip whether it is compressed; zero when the key
	// was not found.
	Stored int
	Gzip   bool
	// Decoded is the size of the JSON the value decoded to; 0 when it was not decoded.
	Decoded int64
}

// New returns a Resolver.
func New(c Config) *Resolver {
	if c.BusyFlag == "" {
		c.BusyFlag = ResolvedPoolFlag
	}
	return &Resolver{c: c, secrets: map[types.NamespacedName]secretRead{}}
}

// Key is the Secret a ref points at, its namespace defaulted.
func (r *Resolver) Key(ref olmv1.ObjectSourceRef) types.NamespacedName {
	return types.NamespacedName{Namespace: ref.NamespaceOr(r.c.SystemNamespace), Name: ref.Name}
}

// secret returns the Secret key as read once by Get, for the ref to its data key dataKey; a failed
// read is a *Failure (SecretMissing or SecretUnreadable, or Busy with ChargeReads).
func (r *Resolver) secret(ctx context.Context, key types.NamespacedName, dataKey string) (*corev1.Secret, error) {
	read, ok := r.secrets[key]
	if !ok {
		if r.c.ChargeReads {
			if err := r.c.Budget.Hold(ReadCost); err != nil {
				// Not kept: the request is refused for want of room (the Budget is Busy).
				return nil, &Failure{Reason: Busy, Flag: r.c.BusyFlag, Secret: key, Key: dataKey, Err: err}
			}
		}
		sec, err := r.c.Get(ctx, key)
		if r.c.ChargeReads {
			var kept int64
			if err == nil {
				kept = min(int64(sec.Size()), ReadCost)
			}
			r.c.Budget.Unhold(ReadCost - kept)
		}
		if err != nil {
			read.err = readFailure(key, err)
		} else {
			read.secret = sec
		}
		r.secrets[key] = read
	}
	if read.err != nil {
		return nil, read.err
	}
	return read.secret, nil
}

// Resolve returns the object ref points at; a failure is a *Failure.
func (r *Resolver) Resolve(ctx context.Context, ref olmv1.ObjectSourceRef) (map[string]any, error) {
	v, err := r.Value(ctx, ref)
	return v.Object, err
}

// Value resolves ref as Resolve does, and says what it found on the way, also when it fails.
func (r *Resolver) Value(ctx context.Context, ref olmv1.ObjectSourceRef) (Value, error) {
	key := r.Key(ref)
	sec, err := r.secret(ctx, key, ref.Key)
	if err != nil {
		return Value{}, err
	}
	if r.c.RequireImmutable && !ptr.Deref(sec.Immutable, false) {
		return Value{}, &Failure{Reason: NotImmutable, Secret: key, Key: ref.Key}
	}
	stored, ok := sec.Data[ref.Key]
	if !ok {
		return Value{}, &Failure{Reason: KeyMissing, Secret: key, Key: ref.Key}
	}
	v := Value{Stored: len(stored), Gzip: content.IsGzip(stored)}
	waitCtx := ctx
	if r.c.WaitContext != nil {
		waitCtx = r.c.WaitContext
	}
	id := key.String() + "/" + ref.Key
	obj, err := r.c.Budget.Resolve(waitCtx, id, stored, ref.Key)
	if err != nil {
		return v, valueFailure(key, ref.Key, err, r.c.BusyFlag)
	}
	v.Decoded, _ = r.c.Budget.Decoded(id)
	if !isKubernetesObject(obj) {
		return v, &Failure{Reason: NotAnObject, Secret: key, Key: ref.Key, Err: ErrNotKubernetesObject}
	}
	v.Object = obj
	return v, nil
}

// Func returns Resolve with ctx, as a ResolveFunc.
func (r *Resolver) Func(ctx context.Context) ResolveFunc {
	return func(ref olmv1.ObjectSourceRef) (map[string]any, error) { return r.Resolve(ctx, ref) }
}

// isKubernetesObject: apiVersion and kind are non-empty strings.
func isKubernetesObject(obj map[string]any) bool {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	return apiVersion != "" && kind != ""
}

// SecretResolver returns the ResolveFunc of one kubectl cos command (or kubectl cos apply's
// pipeline): a Resolver over get whose refs share a budget of memory (ResolveMemory.NewBudget), which goes back to
// its pool when ctx ends, so ctx must be the resolution's.
func SecretResolver(ctx context.Context, memory ResolveMemory, get GetSecretFunc, systemNamespace string) ResolveFunc {
	budget := memory.NewBudget()
	if memory.Pool != nil {
		context.AfterFunc(ctx, budget.Release)
	}
	return New(Config{Get: get, SystemNamespace: systemNamespace, Budget: budget}).Func(ctx)
}

// RequestResolver returns the ResolveFunc of one admission request of the webhook: a Resolver over
// get whose refs draw from budget, the request's own (drawn from the admission pool), which is
// charged the Secrets read too, as they are kept for the request; its owner releases it.
func RequestResolver(ctx context.Context, budget *content.Budget, get GetSecretFunc, systemNamespace string) ResolveFunc {
	return New(Config{Get: get, SystemNamespace: systemNamespace, Budget: budget, BusyFlag: AdmissionPoolFlag, ChargeReads: true}).Func(ctx)
}
