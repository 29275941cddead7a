package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestSweepLosesToARefsOnlyCreate (issues 27 and 35): a ClusterObjectSet deleted with orphan
// propagation leaves its Secrets to the sweep; the sweep sees them unused for a whole grace period,
// confirms with a live list and is about to delete them, when the same refs are created again (kubectl
// apply of the stored YAML), by a creator whose create writes nothing (OLM's identity skips check-refs,
// or check-refs times out: it fails open). The sweep deletes them; its restore, which lists the live
// ClusterObjectSets after the delete, creates them again from its quarantine copies, byte for byte,
// and the re-created ClusterObjectSet rolls out with all its content.
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
	// another name (the same name races the collector's orphan finalizer), writing nothing.
	copyRefs(t, stored, again)
	before := map[string]map[string][]byte{}
	for _, s := range secrets {
		full := &corev1.Secret{}
		if err := c().Get(ctx, client.ObjectKeyFromObject(s), full); err != nil {
			t.Fatal(err)
		}
		before[s.Name] = full.Data
	}
	// The sweep deletes the version it judged: all of them, unless the reconciler's ownership patch
	// (a new version, owned) got there first. Either way the content must be there after Restore.
	n, err := sweeper.Delete(ctx, judged)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the sweep deleted %d of the %d Secrets the create references", n, len(keys))
	if err := sweeper.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		got := &corev1.Secret{}
		if err := c().Get(ctx, key, got); err != nil {
			t.Fatalf("Secret %s, which %s references, was not restored: %v", key, again, err)
		}
		if diff := cmp.Diff(before[key.Name], got.Data); diff != "" {
			t.Errorf("Secret %s restored with other data", key)
		}
	}
	testenv.Env.WaitForCondition(t, again, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
}

// TestCollectorLosesToARefsOnlyCreate (issue 35): the garbage collector deletes a ClusterObjectSet's
// Secrets once it is gone, and no live read can see a create that copies its refs while that create
// is admitted but not stored (no check-refs call ran for it: OLM's identity, or the call failed). The
// Secret guard, which the collector is not exempt from, writes each Secret's quarantine copy before it
// admits the delete; the sweep's restore then creates the Secrets again for the ClusterObjectSet that
// references them, byte for byte, and it rolls out with all its content. The create is made here
// after the collector's deletes, which leaves the store in the state the race leaves it in.
func TestCollectorLosesToARefsOnlyCreate(t *testing.T) {
	name := fmt.Sprintf("gc-race-%d", time.Now().UnixNano()%1e6)
	again := name + "-again"
	testenv.Env.RemoveAfter(t, name, again)
	testenv.Env.EnsureNamespace(t, name)
	create(t, builders.COS(name, builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithCollisionProtection(olmv1.CollisionProtectionNone),
		builders.WithPhase("configuration", builders.InlineConfigMaps(name, "cm", 3)...)))
	stored := testenv.Env.WaitForCondition(t, name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	waitSecretsOwnedBy(t, stored)
	keys := stored.ReferencedSecrets(testenv.SystemNamespace)
	before := map[string]map[string][]byte{}
	secrets := secretsAt(keys)
	for _, s := range secrets {
		if err := c().Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			t.Fatal(err)
		}
		before[s.Name] = s.Data
	}

	if err := c().Delete(ctx, stored, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "the collector to delete the Secrets, each after its copy was written", func(ctx context.Context) (bool, string) {
		for _, s := range secrets {
			if err := c().Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{}); !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("Secret %s: %v", s.Name, err)
			}
		}
		return true, ""
	})
	for _, s := range secrets {
		q := quarantineOf(t, s)
		if q == nil {
			t.Fatalf("the collector deleted Secret %s and no quarantine copy of it is left", s.Name)
		}
		if q.Annotations[secretdata.AnnotationQuarantineDigest] != secretdata.DataDigest(before[s.Name]) {
			t.Errorf("the quarantine copy of Secret %s was made of other data", s.Name)
		}
	}

	copyRefs(t, stored, again)
	if err := newSweeper(nil).Restore(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		got := &corev1.Secret{}
		if err := c().Get(ctx, key, got); err != nil {
			t.Fatalf("Secret %s, which %s references, was not restored: %v", key, again, err)
		}
		if diff := cmp.Diff(before[key.Name], got.Data); diff != "" {
			t.Errorf("Secret %s restored with other data", key)
		}
	}
	testenv.Env.WaitForCondition(t, again, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
}
