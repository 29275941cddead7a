// Package objectdata writes and reads the object-data Secrets of ClusterObjectSets with a client: the
// first of the three crash-safe steps (Secrets, then the ClusterObjectSet, then the reconciler's
// ownership), and the resolution of refs for comparing content. The mutating webhook and kubectl cos
// apply both write through Writer, so that the same plan (content.PlanFor) gives the same Secrets,
// created or reused the same way, whoever writes them. The decisions are pure functions of
// internal/secretdata and internal/content; this package reads, calls them and writes.
package objectdata

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
)

// DefaultConcurrency is how many Secrets a Writer writes at once unless told otherwise.
const DefaultConcurrency = 4

const (
	// reuseAttempts bounds how often a Secret that vanishes or changes between reading and touching
	// it (the sweep deleted it, another request touched it) is created or checked again.
	reuseAttempts = 5
)

// Writer creates the Secrets of a plan in Namespace. It is the admission pipeline's Store
// (webhook/admission) over a client, for the webhook and kubectl cos apply alike.
type Writer struct {
	// Client writes Secrets.
	Client client.Client
	// Reader reads Secrets and ClusterObjectSets uncached, so that a Secret written a moment ago is
	// seen.
	Reader client.Reader
	// Namespace is the system namespace that holds the object-data Secrets.
	Namespace string
	// Concurrency bounds the Secrets written at once; 0 or less means DefaultConcurrency.
	Concurrency int
	// Written, when set, is called once per Secret of the plan as soon as it is written, reused or
	// (on a dry run) checked, with its index in plan.Secrets and whether it was created. It may be
	// called from several goroutines at once.
	Written func(i int, created bool)
}

// Write creates the planned Secrets of the ClusterObjectSet cosName, at most Concurrency at once. An
// existing Secret of the same name is accepted only when it is ours and holds exactly the planned
// content (secretdata.Unusable); a reused one loses owner
// references to ClusterObjectSets that are gone or being deleted. A dry run checks existing Secrets
// the same way and writes nothing. It returns how many Secrets it created. A Secret that is not ours
// is a *secretdata.ConflictError; a failed read or write a *secretdata.WriteError.
func (w *Writer) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	g, gctx := errgroup.WithContext(ctx)
	limit := w.Concurrency
	if limit <= 0 {
		limit = DefaultConcurrency
	}
	g.SetLimit(limit)
	created := make([]bool, len(plan.Secrets))
	for i, s := range plan.Secrets {
		want := secretdata.ObjectDataSecret(cosName, w.Namespace, s)
		g.Go(func() error {
			var err error
			if dryRun {
				_, err = w.checkExisting(gctx, want, true)
			} else {
				created[i], err = w.createOrReuse(gctx, want)
			}
			if err == nil && w.Written != nil {
				w.Written(i, created[i])
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	n := 0
	for _, c := range created {
		if c {
			n++
		}
	}
	return n, nil
}

// createOrReuse creates the Secret, or reuses an existing one that holds exactly the wanted content
// (touch). It reports whether it created the Secret.
func (w *Writer) createOrReuse(ctx context.Context, want *corev1.Secret) (bool, error) {
	key := client.ObjectKeyFromObject(want)
	var err error
	for range reuseAttempts {
		err = w.Client.Create(ctx, want.DeepCopy())
		if err == nil {
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, &secretdata.WriteError{Secret: key, Err: err}
		}
		var got *corev1.Secret
		if got, err = w.checkExisting(ctx, want, false); err != nil {
			var conflict *secretdata.ConflictError
			if errors.As(err, &conflict) || !apierrors.IsNotFound(err) {
				return false, err
			}
			continue // deleted since the create: create it again
		}
		var done bool
		if done, err = w.touch(ctx, got); done || err != nil {
			return false, err
		}
	}
	return false, &secretdata.WriteError{Secret: key, Err: fmt.Errorf("it changed or vanished %d times while being reused: %w", reuseAttempts, err)}
}

// touch drops, from a Secret that this request is about to reference, read at got, the owner
// references to ClusterObjectSets that are gone or being deleted (a ClusterObjectSet deleted and now
// re-created, restored, or pruned by a GitOps wave whose next revision copies its refs), which would
// have the garbage collector delete it; the new ClusterObjectSet's reconciler takes ownership. It
// writes nothing when there are none: so a request writes each existing Secret at most once per owner
// that went away, whoever sends it, and no write is what keeps content from the orphan sweep (the
// sweep's quarantine copy and restore are: controllers.OrphanSweeper).
//
// The write is guarded by got's resourceVersion. It reports whether the Secret needs nothing more;
// false with no error means it changed or vanished meanwhile: read it again.
func (w *Writer) touch(ctx context.Context, got *corev1.Secret) (bool, error) {
	key := client.ObjectKeyFromObject(got)
	live, err := w.liveOwners(ctx, got.OwnerReferences)
	if err != nil {
		return false, &secretdata.WriteError{Secret: key, Err: err}
	}
	if len(live) == len(got.OwnerReferences) {
		return true, nil
	}
	patch := client.MergeFromWithOptions(got.DeepCopy(), client.MergeFromWithOptimisticLock{})
	got.OwnerReferences = live
	err = w.Client.Patch(ctx, got, patch)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, nil
	default:
		return false, &secretdata.WriteError{Secret: key, Err: err}
	}
}

// Touch drops dead owner references (touch) from the object-data Secrets of the system namespace that
// a ClusterObjectSet being created references by refs the user gave (a refs-only create, or refs
// copied from another ClusterObjectSet), so that the garbage collector does not take them with a
// ClusterObjectSet that is gone. keys outside the system namespace, and Secrets that are missing or
// not of the object-data type, are not written and are returned as untouched, in the order given,
// without saying which of these they are.
func (w *Writer) Touch(ctx context.Context, keys []client.ObjectKey) ([]client.ObjectKey, error) {
	var untouched []client.ObjectKey
	for _, key := range keys {
		if key.Namespace != w.Namespace {
			untouched = append(untouched, key)
			continue
		}
		ok, err := w.touchOne(ctx, key)
		if err != nil {
			return nil, err
		}
		if !ok {
			untouched = append(untouched, key)
		}
	}
	return untouched, nil
}

// touchOne touches one Secret; false: missing or not object-data.
func (w *Writer) touchOne(ctx context.Context, key client.ObjectKey) (bool, error) {
	for range reuseAttempts {
		got := &corev1.Secret{}
		if err := w.Reader.Get(ctx, key, got); apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, &secretdata.WriteError{Secret: key, Err: err}
		}
		if got.Type != olmv1.SecretTypeObjectData {
			return false, nil
		}
		done, err := w.touch(ctx, got)
		if done || err != nil {
			return done, err
		}
	}
	return false, &secretdata.WriteError{Secret: key, Err: fmt.Errorf("it changed %d times while being touched", reuseAttempts)}
}

// liveOwners returns the owner references that point at something other than a ClusterObjectSet, or
// at a live ClusterObjectSet (secretuse.Live, read uncached) with that uid.
func (w *Writer) liveOwners(ctx context.Context, refs []metav1.OwnerReference) ([]metav1.OwnerReference, error) {
	var live []metav1.OwnerReference
	for _, ref := range refs {
		if !collision.IsClusterObjectSetRef(ref) {
			live = append(live, ref)
			continue
		}
		owner := &olmv1.ClusterObjectSet{}
		err := w.Reader.Get(ctx, client.ObjectKey{Name: ref.Name}, owner)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading its owner ClusterObjectSet %s: %w", ref.Name, err)
		case owner.UID == ref.UID && secretuse.Live(owner):
			live = append(live, ref)
		}
	}
	return live, nil
}

// GetClusterObjectSet reads the ClusterObjectSet name with Reader (the API server's NotFound when
// there is none).
func (w *Writer) GetClusterObjectSet(ctx context.Context, name string) (*olmv1.ClusterObjectSet, error) {
	cos := &olmv1.ClusterObjectSet{}
	if err := w.Reader.Get(ctx, client.ObjectKey{Name: name}, cos); err != nil {
		return nil, err
	}
	return cos, nil
}

// GetSecret reads a Secret with Reader (the API server's NotFound when there is none).
func (w *Writer) GetSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	return SecretGetter(w.Reader)(ctx, key)
}

// checkExisting accepts an existing Secret only when it is one of ours with exactly the wanted
// content, and returns it. On a dry run a missing Secret is fine: the real request would create it.
func (w *Writer) checkExisting(ctx context.Context, want *corev1.Secret, dryRun bool) (*corev1.Secret, error) {
	got := &corev1.Secret{}
	key := client.ObjectKeyFromObject(want)
	if err := w.Reader.Get(ctx, key, got); err != nil {
		if dryRun && apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, &secretdata.WriteError{Secret: key, Err: err}
	}
	if why := secretdata.Unusable(got, want); len(why) > 0 {
		return nil, &secretdata.ConflictError{Secret: key, Why: strings.Join(why, ", ")}
	}
	return got, nil
}

// Resolver returns the ResolveFunc of one kubectl cos command: the one resolver (secretdata.Resolver)
// reading each ref's Secret with reader (ref.namespace empty meaning systemNamespace), the refs
// sharing one budget of memory (secretdata.ResolveMemory.NewBudget). With a pool, a ref waits with
// ctx for room that others hold, and fails as secretdata.Busy when ctx ends first; the budget goes
// back to the pool when ctx ends, so ctx must be the command's. Failures are *secretdata.Failure;
// they name Secrets and keys, never content.
func Resolver(ctx context.Context, reader client.Reader, systemNamespace string, memory secretdata.ResolveMemory) secretdata.ResolveFunc {
	return secretdata.SecretResolver(ctx, memory, SecretGetter(reader), systemNamespace)
}

// SecretGetter reads Secrets with reader, for secretdata.
func SecretGetter(reader client.Reader) secretdata.GetSecretFunc {
	return func(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
		sec := &corev1.Secret{}
		if err := reader.Get(ctx, key, sec); err != nil {
			return nil, err
		}
		return sec, nil
	}
}
