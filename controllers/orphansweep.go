package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

// OrphanSweeper periodically deletes object-data Secrets whose ClusterObjectSet never appeared (the
// admission request that wrote them failed later), and those whose ClusterObjectSet exists but
// neither references nor owns them, once their grace period has passed: GracePeriod counted from
// the Secret's creation or, when the webhook reused it since, from its last use
// (content.LastUsedAnnotation).
type OrphanSweeper struct {
	Client          client.Client
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

// Orphans lists the object-data Secrets that are orphaned now.
func (s *OrphanSweeper) Orphans(ctx context.Context) ([]corev1.Secret, error) {
	secrets := &corev1.SecretList{}
	if err := s.Client.List(ctx, secrets, client.InNamespace(s.SystemNamespace), client.HasLabels{olmv1.LabelRevisionName}); err != nil {
		return nil, err
	}
	sets := &olmv1.ClusterObjectSetList{}
	if err := s.Client.List(ctx, sets); err != nil {
		return nil, err
	}
	return orphans(secrets.Items, sets.Items, s.SystemNamespace, s.clock().Now(), s.GracePeriod), nil
}

// orphans returns the object-data Secrets among secrets that may be swept at now, judged against
// the ClusterObjectSets sets (see orphaned).
func orphans(secrets []corev1.Secret, sets []olmv1.ClusterObjectSet, systemNamespace string, now time.Time, grace time.Duration) []corev1.Secret {
	byLabel := map[string]*olmv1.ClusterObjectSet{}
	for i := range sets {
		byLabel[content.RevisionLabelValue(sets[i].Name)] = &sets[i]
	}
	var out []corev1.Secret
	for _, sec := range secrets {
		if orphaned(&sec, byLabel[sec.Labels[olmv1.LabelRevisionName]], systemNamespace, now, grace) {
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
			return n, fmt.Errorf("deleting orphaned Secret %s: %w", klog.KObj(sec), err)
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

// orphaned decides whether an object-data Secret may be swept at now: its grace period, counted
// from its creation or its last recorded use, has passed, and cos (the ClusterObjectSet its label
// names, or nil) neither owns nor references it.
func orphaned(sec *corev1.Secret, cos *olmv1.ClusterObjectSet, systemNamespace string, now time.Time, grace time.Duration) bool {
	if sec.Type != olmv1.SecretTypeObjectData {
		return false
	}
	if now.Sub(lastUsed(sec)) < grace {
		return false
	}
	if cos == nil {
		return true
	}
	_, referenced := cos.RefTo(sec.Namespace, sec.Name, systemNamespace)
	return !referenced && !hasOwner(sec, cos)
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
