package objectdata

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// KeepCopy writes the quarantine copy of the object-data Secret sec (read with its data) before sec
// is deleted, or finds it written already, exactly (an earlier attempt that died before its delete,
// or the other of the two deleters). It is the one way a Secret's content is kept before a delete:
// the orphan sweep calls it before its own deletes, and the Secret guard before it admits anyone
// else's (the garbage collector's above all), so that every delete of an object-data Secret of the
// system namespace can be undone by the sweep's restore (controllers.OrphanSweeper.Restore) while a
// ClusterObjectSet admitted before it may still be stored. w creates the copy; r reads it back,
// uncached. Errors name the copy, never content.
func KeepCopy(ctx context.Context, w client.Writer, r client.Reader, sec *corev1.Secret) error {
	q := secretdata.Quarantine(sec)
	err := w.Create(ctx, q)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("writing its quarantine copy %s/%s: %w", q.Namespace, q.Name, err)
	}
	got := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(q), got); err != nil {
		return fmt.Errorf("reading its quarantine copy %s/%s: %w", q.Namespace, q.Name, err)
	}
	if !secretdata.SameQuarantine(got, sec) {
		return fmt.Errorf("its quarantine copy %s/%s holds something else", got.Namespace, got.Name)
	}
	return nil
}
