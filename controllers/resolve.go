package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// unresolvedRefs says why resolution did not give every object, in the first message of each kind:
// blocking needs a person (Blocked), retryable may resolve itself (Retrying). Messages read like
// upstream's (OLM v1 operator-controller) and name Secrets, keys and phases, never content.
type unresolvedRefs struct {
	blocking, retryable string
	// busy: a ref waited for room in Resolve.Pool and gave up; a later reconcile resolves it.
	busy bool
}

// resolve returns the objects of every phase: inline ones as given, refs read from their Secrets by
// the one resolver (secretdata.Resolver). Unresolvable objects are nil in the result, with the first
// failures reported. As upstream does, every referenced Secret must be immutable before anything is
// resolved: the mutable ones are listed together. The refs of one ClusterObjectSet share a budget of
// Resolve.MaxResolvedBytes of resolved content (content.Budget): every ref is charged its object's
// cost, but each Secret is read and each key decoded once, and refs to it share the decoded object.
// The budget draws from Resolve.Pool, the reconciler's own (admission requests draw from another):
// holding nothing, it waits up to poolWait for room that other reconciles hold; holding some, it
// never waits (content.Pool). Either way, no room makes the refs retryable and unres.busy, and the
// reconcile is requeued without holding a worker. The caller calls release once it is done with the
// objects. Callers must not change resolved objects in place (applyObject copies first).
func (r *ClusterObjectSetReconciler) resolve(ctx context.Context, cos *olmv1.ClusterObjectSet) (resolved [][]*unstructured.Unstructured, unres unresolvedRefs, release func()) {
	secrets := map[client.ObjectKey]*corev1.Secret{}
	if unres.blocking = r.checkImmutable(ctx, cos, secrets); unres.blocking != "" {
		return make([][]*unstructured.Unstructured, len(cos.Spec.Phases)), unres, func() {}
	}
	budget := r.Resolve.NewBudget()
	waitCtx, cancel := context.WithTimeout(ctx, poolWait)
	defer cancel()
	res := secretdata.New(secretdata.Config{
		// The cache holds object-data Secrets without their data: content is read uncached, once per
		// Secret and resolution, unless r.contents has this version of the Secret.
		Get: func(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
			if sec, ok := secrets[key]; ok && sec.Data != nil {
				return sec, nil
			}
			return r.readSecret(ctx, key, secrets[key])
		},
		SystemNamespace:  r.SystemNamespace,
		Budget:           budget,
		WaitContext:      waitCtx,
		RequireImmutable: true, // checkImmutable saw them immutable: one may have been replaced since
	})
	out := make([][]*unstructured.Unstructured, len(cos.Spec.Phases))
	for i, p := range cos.Spec.Phases {
		out[i] = make([]*unstructured.Unstructured, len(p.Objects))
		for j, o := range p.Objects {
			if !o.IsRef() {
				out[i][j] = o.Object.DeepCopy()
				continue
			}
			obj, err := res.Resolve(ctx, o.Ref)
			if err == nil {
				// A wrapper of its own per ref; the map is shared by every ref to this key.
				out[i][j] = &unstructured.Unstructured{Object: obj}
				continue
			}
			where := fmt.Sprintf("resolving ref in phase %q: ", p.Name)
			blocked, missing := unresolvedReason(err, budget.Limit())
			switch {
			case blocked != "" && unres.blocking == "":
				unres.blocking = where + blocked
			case missing != "" && unres.retryable == "" && unres.blocking == "":
				unres.retryable = where + missing
			}
		}
	}
	unres.busy = budget.Busy() || waitCtx.Err() != nil
	return out, unres, budget.Release
}

// poolWait bounds how long a reconcile that holds nothing waits for room in Resolve.Pool, which only
// other reconciles hold; past it the reconcile is requeued rather than keep a worker.
const poolWait = time.Second

// checkImmutable reads every referenced Secret's metadata (into secrets) and returns upstream's
// Blocked message listing those that are not immutable, deduplicated and in spec order; Secrets that
// cannot be read are left to resolution, which reports them.
func (r *ClusterObjectSetReconciler) checkImmutable(ctx context.Context, cos *olmv1.ClusterObjectSet, secrets map[client.ObjectKey]*corev1.Secret) string {
	var mutable []string
	for _, key := range cos.ReferencedSecrets(r.SystemNamespace) {
		sec, err := r.getSecret(ctx, key)
		if err != nil {
			continue
		}
		secrets[key] = sec
		if !ptr.Deref(sec.Immutable, false) {
			mutable = append(mutable, key.String())
		}
	}
	if len(mutable) == 0 {
		return ""
	}
	return mutableSecretsMessage(mutable...)
}

// mutableSecretsMessage is upstream's Blocked message for referenced Secrets that are not immutable.
func mutableSecretsMessage(keys ...string) string {
	return "the following secrets are not immutable (referenced secrets must have immutable set to true): " + strings.Join(keys, ", ")
}

// unresolvedReason words a resolver's failure in upstream's words (OLM v1 operator-controller's
// resolveObjectRef, where it has one), as blocked (needs a person) or missing (retryable): a missing
// Secret or key, or no room in Resolve.Pool in time, is missing; content that does not match its
// content key, cannot be decoded, is not a Kubernetes object or is past the ClusterObjectSet's budget
// (of limit bytes) is blocked. The failures name Secrets and keys, never content.
func unresolvedReason(err error, limit int64) (blocked, missing string) {
	var f *secretdata.Failure
	if !errors.As(err, &f) {
		return "", err.Error()
	}
	secret := describeKey("Secret", f.Secret)
	switch f.Reason {
	case secretdata.SecretMissing, secretdata.SecretUnreadable:
		// The API server's error names the resource and name only (secrets "x" not found).
		return "", fmt.Sprintf("getting %s: %v", secret, f.Err)
	case secretdata.KeyMissing:
		return "", fmt.Sprintf("key %q not found in %s", f.Key, secret)
	case secretdata.Busy:
		return "", fmt.Sprintf("key %q in %s: %v (%s)", f.Key, secret, f.Err, f.Flag)
	case secretdata.NotImmutable:
		return mutableSecretsMessage(f.Secret.String()), ""
	case secretdata.OverBudget:
		return fmt.Sprintf("key %q in %s: the resolved content of this ClusterObjectSet exceeds the limit of %d bytes (--max-resolved-bytes)", f.Key, secret, limit), ""
	case secretdata.DigestMismatch:
		return fmt.Sprintf("key %q in %s: the content does not match its content-addressed key: %v", f.Key, secret, f.Err), ""
	case secretdata.TooLarge:
		return fmt.Sprintf("decompressed data for key %q in %s exceeds maximum size (%d bytes)", f.Key, secret, content.MaxDecompressedSize), ""
	default: // Corrupt, NotAnObject
		return fmt.Sprintf("unmarshaling object from key %q in %s: %v", f.Key, secret, f.Err), ""
	}
}

// getSecret reads a Secret's metadata: object-data Secrets of the system namespace from the cache,
// without their data; any other uncached, with its data (the cache holds only labelled Secrets of the
// system namespace, and none of their data).
func (r *ClusterObjectSetReconciler) getSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	if key.Namespace == r.SystemNamespace {
		err := r.Client.Get(ctx, key, sec)
		if err == nil {
			return sec, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	if err := r.APIReader.Get(ctx, key, sec); err != nil {
		return nil, err
	}
	return sec, nil
}

// readSecret reads a Secret with its content: from r.contents when it holds the version that meta
// (the cached metadata, or nil) names, otherwise uncached. A Secret without data gets an empty map, so
// that its next ref in the same resolution does not read it again.
func (r *ClusterObjectSetReconciler) readSecret(ctx context.Context, key client.ObjectKey, meta *corev1.Secret) (*corev1.Secret, error) {
	if meta != nil {
		if data, ok := r.contents.get(meta); ok {
			sec := meta.DeepCopy()
			sec.Data = data
			return sec, nil
		}
	}
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, sec); err != nil {
		return nil, err
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	r.contents.put(sec)
	return sec, nil
}
