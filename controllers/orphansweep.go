package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/secretuse"
)

// OrphanSweeper periodically deletes the object-data Secrets of the system namespace that nobody uses
// (no live ClusterObjectSet references them, internal/shared/secretuse) and no existing ClusterObjectSet
// owns, once they have been seen so, unchanged, for GracePeriod (secretuse.Sightings): on the
// sweeper's own clock, from the moment it first saw the Secret unused at its resourceVersion. These are
// Secrets whose ClusterObjectSet never appeared (the admission request that wrote them failed later),
// or was deleted with orphan propagation. The revision-name label never decides it: a Secret written
// for one ClusterObjectSet and referenced by another is kept for as long as the other exists.
//
// Every admission that references a Secret writes it first (the webhook's touch, which changes its
// resourceVersion), and the sweep deletes only the resourceVersion it saw unused for the whole grace
// period, after confirming with a live list of ClusterObjectSets taken once that period has passed:
// that write is the serialization point between the sweep and a create that references the Secret.
type OrphanSweeper struct {
	// Client lists through the manager's cache and deletes; APIReader confirms candidates with an
	// uncached list of ClusterObjectSets (nil: the cache's answer stands, for tests).
	Client          client.Client
	APIReader       client.Reader
	SystemNamespace string
	Interval        time.Duration
	// GracePeriod must be longer than the longest admission request (the API server's request
	// timeout), so that a Secret touched by a request is kept until its ClusterObjectSet is stored.
	GracePeriod time.Duration
	// Clock is the one clock every grace period is measured on; nil is the real clock.
	Clock clock.PassiveClock
	// BeforeDelete, when set (tests), is called with the Secrets about to be deleted, after the live
	// confirmation and before the first delete.
	BeforeDelete func(ctx context.Context, secrets []corev1.Secret)
	Metrics      *Metrics

	mu        sync.Mutex
	sightings secretuse.Sightings
}

// SafeGracePeriod is the shortest grace period that outlasts any admission request: the API server's
// default request timeout (60 s), within which a create that touched a Secret is stored or fails.
const SafeGracePeriod = time.Minute

// Start runs the sweep every Interval until ctx ends (a manager Runnable; it runs on the leader).
func (s *OrphanSweeper) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("orphan-sweep")
	if s.GracePeriod < SafeGracePeriod {
		log.Info("the orphan grace period is shorter than the longest admission request: a Secret that a create still in admission references may be swept",
			"gracePeriod", s.GracePeriod.String(), "safeGracePeriod", SafeGracePeriod.String())
	}
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
	if len(orphans) > 0 && s.BeforeDelete != nil {
		s.BeforeDelete(ctx, orphans)
	}
	return s.Delete(ctx, orphans)
}

// Waiting is how many object-data Secrets the sweep has seen unused and not yet deleted.
func (s *OrphanSweeper) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sightings.Waiting()
}

// SeenUnused reports whether the sweep has seen the Secret uid unused at resourceVersion rv.
func (s *OrphanSweeper) SeenUnused(uid types.UID, rv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sightings.Seen(secretuse.Version{UID: uid, ResourceVersion: rv})
}

// Orphans lists the object-data Secrets that may be swept now. The cache proposes the unused ones
// (secretuse.Unused) and Sightings says which have been so, unchanged, for the grace period; each of
// those is confirmed against ClusterObjectSets listed live from the API server after that, so a
// ClusterObjectSet the cache has not seen yet (a ref copied a moment ago) still protects its Secrets.
func (s *OrphanSweeper) Orphans(ctx context.Context) ([]corev1.Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	secrets := &corev1.SecretList{}
	if err := s.Client.List(ctx, secrets, client.InNamespace(s.SystemNamespace), client.HasLabels{olmv1.LabelRevisionName}); err != nil {
		return nil, err
	}
	sets := &olmv1.ClusterObjectSetList{}
	if err := s.Client.List(ctx, sets); err != nil {
		return nil, err
	}
	unused := secretuse.UnusedSecrets(secrets.Items, sets.Items, s.SystemNamespace)
	versions := make([]secretuse.Version, len(unused))
	byVersion := make(map[secretuse.Version]corev1.Secret, len(unused))
	for i, sec := range unused {
		versions[i] = secretuse.Version{UID: sec.UID, ResourceVersion: sec.ResourceVersion}
		byVersion[versions[i]] = sec
	}
	due := s.sightings.Observe(versions, s.clock().Now(), s.GracePeriod)
	s.Metrics.OrphansWaiting.Set(float64(s.sightings.Waiting()))
	candidates := make([]corev1.Secret, len(due))
	for i, v := range due {
		candidates[i] = byVersion[v]
	}
	if len(candidates) == 0 || s.APIReader == nil {
		return candidates, nil
	}
	live := &olmv1.ClusterObjectSetList{}
	if err := s.APIReader.List(ctx, live); err != nil {
		return nil, fmt.Errorf("confirming orphaned Secrets: %w", err)
	}
	return secretuse.UnusedSecrets(candidates, live.Items, s.SystemNamespace), nil
}

// Delete deletes the Secrets, each only if it is still exactly the version that was judged (same uid
// and resourceVersion): a Secret that an admission touched meanwhile has a new resourceVersion and
// stays.
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
			s.Metrics.SecretsSwept.Inc()
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
