package testenv

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// WaitForGarbageCollector waits until the garbage collector deletes the dependents of a deleted
// ClusterObjectSet. It watches a CRD's kind only from its discovery resync after the CRD appeared
// (up to a minute, more on loaded machines): tests that wait for dependents to go call this first,
// so their own waits do not measure that.
func (e *Environment) WaitForGarbageCollector(ctx context.Context) error {
	cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "gc-warm-up"}, Spec: olmv1.ClusterObjectSetSpec{
		LifecycleState: olmv1.LifecycleStateActive, Revision: 1, CollisionProtection: olmv1.CollisionProtectionPrevent}}
	if err := e.Client.Create(ctx, cos); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cos), cos); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gc-warm-up", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: cos.Name, UID: cos.UID}}}}
	if err := e.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := e.Client.Delete(ctx, cos); client.IgnoreNotFound(err) != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)
		return apierrors.IsNotFound(err), nil
	})
}
