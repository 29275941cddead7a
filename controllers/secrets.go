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
// collector deletes them with it. A Secret still owned by an earlier ClusterObjectSet of the same
// name (deleted and re-created, or restored from a backup) is handed to this one: its stale owner
// reference is replaced, so the garbage collector never deletes content a live ClusterObjectSet
// uses. A Secret controlled by anything else is left alone. It is idempotent.
func (r *ClusterObjectSetReconciler) ensureSecretOwnership(ctx context.Context, cos *olmv1.ClusterObjectSet) error {
	if !cos.DeletionTimestamp.IsZero() {
		// Never adopt into a ClusterObjectSet being deleted: deleted with orphan propagation, the
		// Secrets it left behind would be owned again, and collected, once it is gone.
		return nil
	}
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
			if sec.Labels[olmv1.LabelRevisionName] != label || sec.Type != olmv1.SecretTypeObjectData {
				continue
			}
			refs, change := ownerRefsFor(sec.OwnerReferences, cos)
			if !change {
				continue
			}
			patch := client.MergeFromWithOptions(sec.DeepCopy(), client.MergeFromWithOptimisticLock{})
			sec.OwnerReferences = refs
			if err := r.Client.Patch(ctx, sec, patch); err != nil {
				return fmt.Errorf("owning Secret %s: %w", klog.KObj(sec), err)
			}
			ownerRefsPatched.Inc()
		}
	}
	return nil
}

// ownerRefsFor returns the owner references an object-data Secret of cos should have, and whether
// they differ from refs: references to earlier ClusterObjectSets of the same name (another uid) are
// dropped and cos is added as the controller, unless something else controls the Secret.
func ownerRefsFor(refs []metav1.OwnerReference, cos *olmv1.ClusterObjectSet) ([]metav1.OwnerReference, bool) {
	kept := make([]metav1.OwnerReference, 0, len(refs)+1)
	stale, has := false, false
	for _, ref := range refs {
		switch {
		case ref.UID == cos.UID:
			has = true
		case ref.Kind == olmv1.ClusterObjectSetKind && ref.APIVersion == olmv1.GroupVersion.String() && ref.Name == cos.Name:
			stale = true
			continue
		case ref.Controller != nil && *ref.Controller:
			// Controlled by something else: not ours to take.
			return refs, false
		}
		kept = append(kept, ref)
	}
	if has && !stale {
		return refs, false
	}
	if !has {
		kept = append(kept, ownerRef(cos))
	}
	return kept, true
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
