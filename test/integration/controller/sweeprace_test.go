package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestSweepLosesToARefsOnlyCreate (issue 27, item 2): a ClusterObjectSet deleted with orphan
// propagation leaves its Secrets to the sweep; the sweep sees them unused for a whole grace period,
// confirms with a live list and is about to delete them, when the same refs are created again (kubectl
// apply of the stored YAML). The create's admission writes the Secrets (the webhook's touch) before the
// ClusterObjectSet is stored, so the sweep's delete, conditional on the version it judged, deletes
// nothing; the re-created ClusterObjectSet rolls out with all its content.
func TestSweepLosesToARefsOnlyCreate(t *testing.T) {
	name := fmt.Sprintf("sweep-race-%d", time.Now().UnixNano()%1e6)
	again := name + "-again"
	testenv.Env.RemoveAfter(t, name, again)
	testenv.Env.EnsureNamespace(t, name)
	create(t, builders.COS(name, builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithCollisionProtection(olmv1.CollisionProtectionNone),
		builders.WithPhase("configuration", builders.InlineConfigMaps(name, "cm", 3)...)))
	stored := testenv.Env.WaitForCondition(t, name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	waitSecretsOwnedBy(t, stored)
	if err := c().Delete(ctx, stored, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	keys := stored.ReferencedSecrets(testenv.SystemNamespace)
	secrets := secretsAt(keys)
	framework.Eventually(ctx, t, "the ClusterObjectSet to be gone and its Secrets to lose their owner", func(ctx context.Context) (bool, string) {
		if err := c().Get(ctx, client.ObjectKey{Name: name}, &olmv1.ClusterObjectSet{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprint(err)
		}
		return unowned(ctx, keys)
	})

	clk := testingclock.NewFakePassiveClock(time.Now())
	sweeper := newSweeper(clk)
	waitSeenUnused(t, sweeper, secrets...)
	clk.SetTime(clk.Now().Add(sweeper.GracePeriod))
	judged, err := sweeper.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	judged = slices.DeleteFunc(judged, func(s corev1.Secret) bool {
		return !slices.Contains(keys, client.ObjectKeyFromObject(&s))
	})
	if len(judged) != len(keys) {
		t.Fatalf("the sweep judged %d of the %d Secrets orphaned", len(judged), len(keys))
	}

	// Between the sweep's live list and its delete: the stored refs are applied again, under
	// another name (the same name races the collector's orphan finalizer; the touch is the same).
	copyRefs(t, stored, again)
	if n, err := sweeper.Delete(ctx, judged); err != nil || n != 0 {
		t.Fatalf("the sweep deleted %d Secrets a ClusterObjectSet being created references (%v)", n, err)
	}
	for _, key := range keys {
		if err := c().Get(ctx, key, &corev1.Secret{}); err != nil {
			t.Errorf("Secret %s: %v", key, err)
		}
	}
	testenv.Env.WaitForCondition(t, again, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
}
