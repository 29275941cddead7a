package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
)

// OrphanSweeper periodically deletes the object-data Secrets of the system namespace that nobody uses
// (no live ClusterObjectSet references them, internal/secretuse) and no existing ClusterObjectSet
// owns, once their grace period has passed: GracePeriod counted from the Secret's creation or, when
// the webhook reused it since, from its last use (content.LastUsedAnnotation). These are Secrets
// whose ClusterObjectSet never appeared (the admission request that wrote them failed later), or was
// deleted with orphan propagation. The revision-name label never decides it: a Secret written for
// one ClusterObjectSet and referenced by another is kept for as long as the other exists.
type OrphanSweeper struct {
	// Client lists through the manager's cache and deletes; APIReader confirms candidates with an
	// uncached list of ClusterObjectSets (nil: the cache's answer stands, for tests).
	Client          client.Client
	APIReader       client.Reader
	SystemNamespace string
	Interval        time.Duration
	GracePeriod     time.Duration
	Clock           clock.PassiveClock
}

// Start runs the sweep every Interval until ctx ends (a manager Runnable; it runs on the leader).
func (s *OrphanSweeper) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("orphan-sweep")
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		if n, err := s.Sweep(ctx); err != nil {
			log.Error(err, "sweeping orphaned Secrets")
		} else if n > 0 {
			log.Info("swept orphaned Secrets", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection makes the sweep run on the leader only.
func (s *OrphanSweeper) NeedLeaderElection() bool { return true }

// Sweep deletes the orphaned Secrets once and returns how many it deleted.
func (s *OrphanSweeper) Sweep(ctx context.Context) (int, error) {
	orphans, err := s.Orphans(ctx)
	if err != nil {
		return 0, err
	}
	return s.Delete(ctx, orphans)
}

// Orphans lists the object-data Secrets that may be swept now (secretuse.Sweepable). The cache
// proposes them; each is confirmed against ClusterObjectSets listed live from the API server, so a
// ClusterObjectSet the cache has not seen yet (a ref copied a moment ago) still protects its Secrets.
func (s *OrphanSweeper) Orphans(ctx context.Context) ([]corev1.Secret, error) {
	secrets := &corev1.SecretList{}
	if err := s.Client.List(ctx, secrets, client.InNamespace(s.SystemNamespace), client.HasLabels{olmv1.LabelRevisionName}); err != nil {
		return nil, err
	}
	sets := &olmv1.ClusterObjectSetList{}
	if err := s.Client.List(ctx, sets); err != nil {
		return nil, err
	}
	now := s.clock().Now()
	candidates := orphans(secrets.Items, sets.Items, s.SystemNamespace, now, s.GracePeriod)
	if len(candidates) == 0 || s.APIReader == nil {
		return candidates, nil
	}
	live := &olmv1.ClusterObjectSetList{}
	if err := s.APIReader.List(ctx, live); err != nil {
		return nil, fmt.Errorf("confirming orphaned Secrets: %w", err)
	}
	return orphans(candidates, live.Items, s.SystemNamespace, now, s.GracePeriod), nil
}

// orphans returns the object-data Secrets among secrets that may be swept at now, judged against
// the ClusterObjectSets sets: nobody uses them, no existing ClusterObjectSet owns them, and their
// grace period has passed (secretuse.Sweepable).
func orphans(secrets []corev1.Secret, sets []olmv1.ClusterObjectSet, systemNamespace string, now time.Time, grace time.Duration) []corev1.Secret {
	existing := map[types.UID]bool{}
	for i := range sets {
		existing[sets[i].UID] = true
	}
	users := secretuse.BySecret(sets, systemNamespace)
	var out []corev1.Secret
	for _, sec := range secrets {
		if sec.Type != olmv1.SecretTypeObjectData {
			continue
		}
		owned := slices.ContainsFunc(sec.OwnerReferences, func(ref metav1.OwnerReference) bool {
			return collision.IsClusterObjectSetRef(ref) && existing[ref.UID]
		})
		if secretuse.Sweepable(users[client.ObjectKeyFromObject(&sec)], owned, lastUsed(&sec), now, grace) {
			out = append(out, sec)
		}
	}
	return out
}

// Delete deletes the Secrets, each only if it is still exactly the version that was judged (same uid
// and resourceVersion): a Secret the webhook reused meanwhile has a new resourceVersion and stays.
func (s *OrphanSweeper) Delete(ctx context.Context, orphans []corev1.Secret) (int, error) {
	n := 0
	for i := range orphans {
		sec := &orphans[i]
		err := s.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return n, fmt.Errorf("deleting orphaned %s: %w", describe(sec), err)
		}
		if err == nil {
			n++
			secretsSwept.Inc()
		}
	}
	return n, nil
}

func (s *OrphanSweeper) clock() clock.PassiveClock {
	if s.Clock == nil {
		return clock.RealClock{}
	}
	return s.Clock
}

// lastUsed is the later of the Secret's creation and the time in its last-used annotation (ignored
// when it does not parse).
func lastUsed(sec *corev1.Secret) time.Time {
	t := sec.CreationTimestamp.Time
	if used, ok := content.LastUsed(sec.Annotations); ok && used.After(t) {
		t = used
	}
	return t
}
