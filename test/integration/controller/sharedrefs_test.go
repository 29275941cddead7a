package controller_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// copyRefs creates a ClusterObjectSet named name whose phases are writer's stored refs, as a user
// copying them from `kubectl get -o yaml` would (user-given refs are kept as given).
func copyRefs(t *testing.T, writer *olmv1.ClusterObjectSet, name string) *olmv1.ClusterObjectSet {
	t.Helper()
	cp := builders.COS(name, builders.WithCollisionProtection(olmv1.CollisionProtectionNone), builders.WithPhases(writer.Spec.Phases...))
	create(t, cp)
	return getCOS(t, name)
}

// waitSecretsOwnedBy waits until every Secret cos references is owned by cos and by no
// ClusterObjectSet in gone.
func waitSecretsOwnedBy(t *testing.T, cos *olmv1.ClusterObjectSet, gone ...*olmv1.ClusterObjectSet) {
	t.Helper()
	framework.Eventually(ctx, t, "the Secrets of "+cos.Name+" to be owned by it", func(ctx context.Context) (bool, string) {
		for _, key := range cos.ReferencedSecrets(testenv.SystemNamespace) {
			s := &corev1.Secret{}
			if err := c().Get(ctx, key, s); err != nil {
				return false, err.Error()
			}
			owned := false
			for _, ref := range s.OwnerReferences {
				owned = owned || ref.UID == cos.UID
				for _, g := range gone {
					if ref.UID == g.UID {
						return false, fmt.Sprintf("Secret %s still owned by %s", s.Name, g.Name)
					}
				}
			}
			if !owned {
				return false, fmt.Sprintf("Secret %s owners %v", s.Name, s.OwnerReferences)
			}
		}
		return true, ""
	})
}

// TestCopiedRefsOutliveTheirWriter (issue 18, items 1 and 2): a ClusterObjectSet created with the refs
// of another one keeps their content when the other is deleted, with background or foreground
// propagation: the delete completes, no sweep deletes the Secrets, and they go with their last user.
func TestCopiedRefsOutliveTheirWriter(t *testing.T) {
	for name, propagation := range map[string]metav1.DeletionPropagation{
		"background": metav1.DeletePropagationBackground,
		"foreground": metav1.DeletePropagationForeground,
	} {
		t.Run(name, func(t *testing.T) {
			writer, user := "xa-"+name, "xb-"+name
			testenv.Env.RemoveAfter(t, writer, user)
			testenv.Env.EnsureNamespace(t, "shared-"+name)
			create(t, builders.COS(writer, builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
				builders.WithCollisionProtection(olmv1.CollisionProtectionNone),
				builders.WithPhase("configuration", builders.InlineConfigMaps("shared-"+name, "cm", 3)...)))
			xa := testenv.Env.WaitForCondition(t, writer, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
			xb := copyRefs(t, xa, user)
			testenv.Env.WaitForCondition(t, user, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
			// Both use the Secrets, so both own them: the collector deletes them with the last one.
			waitSecretsOwnedBy(t, xb)
			waitSecretsOwnedBy(t, xa)

			if err := c().Delete(ctx, xa, client.PropagationPolicy(propagation)); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(ctx, t, writer+" to be gone", func(ctx context.Context) (bool, string) {
				cur := &olmv1.ClusterObjectSet{}
				err := c().Get(ctx, client.ObjectKey{Name: writer}, cur)
				return apierrors.IsNotFound(err), fmt.Sprintf("%v finalizers %v", err, cur.Finalizers)
			})
			waitSecretsOwnedBy(t, xb, xa)
			// A sweep long after the grace period keeps them: xb uses them.
			sweepTwice(t, newSweeper(nil))
			for _, key := range xb.ReferencedSecrets(testenv.SystemNamespace) {
				if err := c().Get(ctx, key, &corev1.Secret{}); err != nil {
					t.Fatalf("a Secret %s uses was lost: %v", user, err)
				}
			}
			// xb still resolves its content: a manifest change would block it, a lost Secret retry it.
			xb = testenv.Env.WaitForCondition(t, user, olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonSucceeded)

			// Its last user gone, the content goes with it.
			if err := c().Delete(ctx, xb, client.PropagationPolicy(propagation)); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(ctx, t, "the Secrets to go with their last user", func(ctx context.Context) (bool, string) {
				for _, key := range xb.ReferencedSecrets(testenv.SystemNamespace) {
					if err := c().Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
						return false, fmt.Sprintf("Secret %s: %v", key, err)
					}
				}
				return true, ""
			})
		})
	}
}

// TestOrphanPropagationLeavesSecretsToTheSweep: deleted with orphan propagation, a ClusterObjectSet
// leaves its Secrets without owner; nobody uses them, so the sweep takes them after the grace period.
func TestOrphanPropagationLeavesSecretsToTheSweep(t *testing.T) {
	testenv.Env.RemoveAfter(t, "orphaned-delete")
	// Its objects outlive it without a controller: the next run (-count) adopts them.
	create(t, builders.COS("orphaned-delete", builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithCollisionProtection(olmv1.CollisionProtectionIfNoController),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", "orphaned-delete", 2)...)))
	cos := testenv.Env.WaitForCondition(t, "orphaned-delete", olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	waitSecretsOwnedBy(t, cos)
	if err := c().Delete(ctx, cos, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	keys := cos.ReferencedSecrets(testenv.SystemNamespace)
	framework.Eventually(ctx, t, "the Secrets to lose their owner", func(ctx context.Context) (bool, string) {
		return unowned(ctx, keys)
	})
	sweepAfterGrace(t, newSweeper(nil), secretsAt(keys)...)
	for _, key := range keys {
		if err := c().Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s nobody uses was not swept: %v", key, err)
		}
	}
}
