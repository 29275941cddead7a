package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

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
	for _, key := range cos.ReferencedSecrets(r.SystemNamespace) {
		if key.Namespace != r.SystemNamespace {
			continue
		}
		sec := &corev1.Secret{}
		if err := r.Client.Get(ctx, key, sec); err != nil {
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

// hasOwner reports whether cos is among the owners of o.
func hasOwner(o metav1.Object, cos *olmv1.ClusterObjectSet) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == cos.UID {
			return true
		}
	}
	return false
}
