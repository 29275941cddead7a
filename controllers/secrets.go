package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

var (
	secretsSwept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cos_externalizer_secrets_swept_total",
		Help: "Orphaned object-data Secrets deleted by the sweep.",
	})
	ownerRefsPatched = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cos_externalizer_secret_owner_references_patched_total",
		Help: "ownerReferences to their ClusterObjectSet added to object-data Secrets.",
	})
)

func init() { ctrlmetrics.Registry.MustRegister(secretsSwept, ownerRefsPatched) }

// ensureSecretOwnership makes cos the controller owner of every object-data Secret of the system
// namespace that carries its revision-name label and that it references, so that the garbage
// collector deletes them with it. It is idempotent.
func (r *Reconciler) ensureSecretOwnership(ctx context.Context, cos *olmv1.ClusterObjectSet) error {
	label := content.RevisionLabelValue(cos.Name)
	done := map[string]bool{}
	for _, p := range cos.Spec.Phases {
		for _, o := range p.Objects {
			if o.Ref.Name == "" || done[o.Ref.Name] || o.Ref.NamespaceOr(r.SystemNamespace) != r.SystemNamespace {
				continue
			}
			done[o.Ref.Name] = true
			sec := &corev1.Secret{}
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.SystemNamespace, Name: o.Ref.Name}, sec); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return err
			}
			if sec.Labels[olmv1.LabelRevisionName] != label || sec.Type != olmv1.SecretTypeObjectData || hasOwner(sec, cos) {
				continue
			}
			if other := metav1.GetControllerOfNoCopy(sec); other != nil {
				// Owned by an earlier ClusterObjectSet of the same name: the sweep deals with it.
				continue
			}
			patch := client.MergeFrom(sec.DeepCopy())
			sec.OwnerReferences = append(sec.OwnerReferences, ownerRef(cos))
			if err := r.Client.Patch(ctx, sec, patch); err != nil {
				return fmt.Errorf("owning Secret %s: %w", klog.KObj(sec), err)
			}
			ownerRefsPatched.Inc()
		}
	}
	return nil
}

func hasOwner(o metav1.Object, cos *olmv1.ClusterObjectSet) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == cos.UID {
			return true
		}
	}
	return false
}

// OrphanSweeper periodically deletes object-data Secrets whose ClusterObjectSet never appeared (the
// admission request that wrote them failed later) once they are older than GracePeriod, and those
// whose ClusterObjectSet exists but no longer references them and is not their owner.
type OrphanSweeper struct {
	Client          client.Client
	SystemNamespace string
	Interval        time.Duration
	GracePeriod     time.Duration
	Clock           clock.PassiveClock
}

// Start runs the sweep every Interval until ctx ends (a manager Runnable; it runs on the leader).
func (s *OrphanSweeper) Start(ctx context.Context) error {
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
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
	secrets := &corev1.SecretList{}
	if err := s.Client.List(ctx, secrets, client.InNamespace(s.SystemNamespace), client.HasLabels{olmv1.LabelRevisionName}); err != nil {
		return 0, err
	}
	sets := &olmv1.ClusterObjectSetList{}
	if err := s.Client.List(ctx, sets); err != nil {
		return 0, err
	}
	byLabel := map[string]*olmv1.ClusterObjectSet{}
	for i := range sets.Items {
		byLabel[content.RevisionLabelValue(sets.Items[i].Name)] = &sets.Items[i]
	}
	now := s.Clock.Now()
	n := 0
	for i := range secrets.Items {
		sec := &secrets.Items[i]
		if sec.Type != olmv1.SecretTypeObjectData || now.Sub(sec.CreationTimestamp.Time) < s.GracePeriod {
			continue
		}
		cos := byLabel[sec.Labels[olmv1.LabelRevisionName]]
		if cos != nil && (hasOwner(sec, cos) || references(cos, sec.Name, s.SystemNamespace)) {
			continue
		}
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

func references(cos *olmv1.ClusterObjectSet, secretName, systemNamespace string) bool {
	for _, p := range cos.Spec.Phases {
		for _, o := range p.Objects {
			if o.Ref.Name == secretName && o.Ref.NamespaceOr(systemNamespace) == systemNamespace {
				return true
			}
		}
	}
	return false
}
