package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

var always = builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"})

// TestEmptyRevisionNeverArchivesItsPredecessor: a revision created with no phases (to be filled
// later) is not complete, so it neither succeeds nor archives the revision before it; once its
// phases are filled it rolls out and takes over.
func TestEmptyRevisionNeverArchivesItsPredecessor(t *testing.T) {
	ns := "empty-revision"
	testenv.Env.EnsureNamespace(t, ns)
	owner := builders.WithLabels(map[string]string{olmv1.LabelOwnerName: "empty-revision-app"})
	testenv.Env.RemoveAfter(t, "empty-revision-1", "empty-revision-2")
	rev1 := builders.COS("empty-revision-1", owner,
		builders.WithPhase("configuration", builders.Inline(builders.ConfigMap(ns, "served", map[string]string{"rev": "1"}))))
	create(t, rev1)
	testenv.Env.WaitForCondition(t, rev1.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")

	rev2 := builders.COS("empty-revision-2", builders.WithRevision(2), owner)
	create(t, rev2)
	got := testenv.Env.WaitForCondition(t, rev2.Name, olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonRollingOut)
	if msg := apimeta.FindStatusCondition(got.Status.Conditions, olmv1.ConditionProgressing).Message; !strings.Contains(msg, "no phases yet") {
		t.Errorf("Progressing message %q does not say the revision is empty", msg)
	}
	if apimeta.FindStatusCondition(got.Status.Conditions, olmv1.ConditionSucceeded) != nil {
		t.Errorf("an empty revision has a Succeeded condition: %s", testenv.Conditions(got))
	}
	// Archiving would have happened in the reconcile that wrote this status.
	if r1 := getCOS(t, rev1.Name); r1.Spec.LifecycleState != olmv1.LifecycleStateActive {
		t.Fatalf("the empty revision archived its predecessor: %s", r1.Spec.LifecycleState)
	}
	if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "served"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the predecessor's object is gone: %v", err)
	}

	got.Spec.Phases = builders.COS("", builders.WithPhase("configuration",
		builders.Inline(builders.ConfigMap(ns, "served", map[string]string{"rev": "2"})))).Spec.Phases
	if err := c().Update(ctx, got); err != nil {
		t.Fatalf("filling the phases: %v", err)
	}
	testenv.Env.WaitForCondition(t, rev2.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
	testenv.Env.WaitForCondition(t, rev1.Name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonArchived)
	cm := &corev1.ConfigMap{}
	if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "served"}, cm); err != nil || cm.Data["rev"] != "2" {
		t.Errorf("after the handover the ConfigMap is %v (%v)", cm.Data, err)
	}
}

// TestDeleteAndRecreateKeepsContent: `kubectl delete cos x; kubectl apply -f x.yaml`. The webhook
// reuses the Secrets still owned by the deleted ClusterObjectSet; the garbage collector must not
// delete them under the new one, which takes them over and succeeds.
func TestDeleteAndRecreateKeepsContent(t *testing.T) {
	const hold = "test.cos-externalizer.io/hold"
	for name, whileTerminating := range map[string]bool{"immediately": false, "while-terminating": true} {
		t.Run(name, func(t *testing.T) {
			cosName := "recreate-" + name
			testenv.Env.RemoveAfter(t, cosName)
			testenv.Env.EnsureNamespace(t, cosName)
			build := func() *olmv1.ClusterObjectSet {
				return builders.COS(cosName, always, builders.WithPhase("configuration", builders.InlineConfigMaps(cosName, "data", 3)...))
			}
			create(t, build())
			first := testenv.Env.WaitForCondition(t, cosName, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
			waitSecretsControlledBy(t, first)

			if whileTerminating {
				// Something else (a backup tool, a policy) holds the old one while it terminates.
				patch := client.MergeFrom(first.DeepCopy())
				controllerutil.AddFinalizer(first, hold)
				if err := c().Patch(ctx, first, patch); err != nil {
					t.Fatal(err)
				}
			}
			if err := c().Delete(ctx, first); err != nil {
				t.Fatal(err)
			}
			if whileTerminating {
				// Our teardown runs; the hold is released while the producer already retries.
				framework.Eventually(ctx, t, "the teardown to finish", func(ctx context.Context) (bool, string) {
					cur := getCOS(t, cosName)
					return !controllerutil.ContainsFinalizer(cur, controllers.Finalizer), fmt.Sprint(cur.Finalizers)
				})
				cur := getCOS(t, cosName)
				patch := client.MergeFrom(cur.DeepCopy())
				controllerutil.RemoveFinalizer(cur, hold)
				if err := c().Patch(ctx, cur, patch); err != nil {
					t.Fatal(err)
				}
				// A GitOps tool re-applies until the name is free.
				framework.Eventually(ctx, t, "the re-create to be accepted", func(ctx context.Context) (bool, string) {
					err := c().Create(ctx, build())
					return err == nil, fmt.Sprint(err)
				})
			} else {
				framework.Eventually(ctx, t, "the ClusterObjectSet to be gone", func(ctx context.Context) (bool, string) {
					err := c().Get(ctx, client.ObjectKey{Name: cosName}, &olmv1.ClusterObjectSet{})
					return apierrors.IsNotFound(err), fmt.Sprint(err)
				})
				create(t, build())
			}
			second := testenv.Env.WaitForCondition(t, cosName, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
			if second.UID == first.UID {
				t.Fatal("the ClusterObjectSet was not re-created")
			}
			waitSecretsControlledBy(t, second, first.UID)
		})
	}
}

// TestRestoreFromBackupKeepsContent: the stored ClusterObjectSet (refs) and its Secrets are restored
// from a backup after a loss. The Secrets come back with owner references to the lost uid; the
// garbage collector must not delete them, and the restored ClusterObjectSet takes them over.
func TestRestoreFromBackupKeepsContent(t *testing.T) {
	cosName := "restore"
	testenv.Env.RemoveAfter(t, cosName)
	testenv.Env.EnsureNamespace(t, cosName)
	create(t, builders.COS(cosName, always, builders.WithPhase("configuration", builders.InlineConfigMaps(cosName, "data", 2)...)))
	lost := testenv.Env.WaitForCondition(t, cosName, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	secrets := waitSecretsControlledBy(t, lost)

	start := time.Now()
	if err := c().Delete(ctx, lost); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "the ClusterObjectSet and its Secrets to be gone", func(ctx context.Context) (bool, string) {
		left := 0
		for _, s := range secrets {
			if err := c().Get(ctx, client.ObjectKeyFromObject(&s), &corev1.Secret{}); !apierrors.IsNotFound(err) {
				left++
			}
		}
		err := c().Get(ctx, client.ObjectKey{Name: cosName}, &olmv1.ClusterObjectSet{})
		return left == 0 && apierrors.IsNotFound(err), fmt.Sprintf("%d Secrets left, ClusterObjectSet: %v", left, err)
	})

	t.Logf("the ClusterObjectSet and its Secrets were gone %s after the delete", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	backup := lost.DeepCopy()
	backup.ObjectMeta = metav1.ObjectMeta{Name: lost.Name, Labels: lost.Labels, Annotations: lost.Annotations}
	backup.Status = olmv1.ClusterObjectSetStatus{}
	create(t, backup)
	for _, s := range secrets {
		restored := s.DeepCopy()
		restored.ObjectMeta = metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels,
			Annotations: s.Annotations, OwnerReferences: s.OwnerReferences}
		if err := c().Create(ctx, restored); err != nil {
			t.Fatal(err)
		}
	}
	restored := testenv.Env.WaitForCondition(t, cosName, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	waitSecretsControlledBy(t, restored, lost.UID)
	t.Logf("the restored ClusterObjectSet succeeded and owned its Secrets %s after the restore", time.Since(start).Round(time.Millisecond))
}

// TestSweepRestoresASecretBeingReused: a producer's apply wrote the Secrets and failed; it retries
// after the grace period, just as the sweep judges them orphaned. The webhook reuses them (it writes
// nothing: they have no owner to drop), the sweep deletes what it judged, and its restore creates
// them again, byte for byte, from its quarantine copies: the retried ClusterObjectSet rolls out.
func TestSweepRestoresASecretBeingReused(t *testing.T) {
	// A name of its own per run: the Secret names follow from it, and those of an earlier run may
	// still wait for the garbage collector.
	name := fmt.Sprintf("sweep-reuse-%d", time.Now().UnixNano())
	testenv.Env.RemoveAfter(t, name)
	cos := builders.COS(name, always, builders.WithPhase("configuration", builders.InlineConfigMaps("default", "sweep-reuse", 2)...))
	plan, err := testenv.PlannedSecrets(cos)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	data := map[string]map[string][]byte{}
	for _, s := range plan.Secrets {
		if err := c().Create(ctx, objectDataSecret(s.Name, cos.Name, s.Data)); err != nil {
			t.Fatal(err)
		}
		names = append(names, s.Name)
		data[s.Name] = s.Data
	}
	clk := testingclock.NewFakePassiveClock(time.Now())
	sweeper := newSweeper(clk)
	var secrets []*corev1.Secret
	for _, name := range names {
		secrets = append(secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: name}})
	}
	waitSeenUnused(t, sweeper, secrets...)
	clk.SetTime(clk.Now().Add(sweeper.GracePeriod))
	judged, err := sweeper.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	judged = slices.DeleteFunc(judged, func(s corev1.Secret) bool { return !slices.Contains(names, s.Name) })
	if len(judged) != len(names) {
		t.Fatalf("the sweep judged %d of the %d Secrets orphaned", len(judged), len(names))
	}

	create(t, cos) // the retry: the webhook reuses the Secrets
	// The sweep deletes the version it judged: all of them, unless the reconciler's ownership patch
	// (a new version, owned) got there first. Either way the content must be there after Restore.
	n, err := sweeper.Delete(ctx, judged)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the sweep deleted %d of the %d reused Secrets", n, len(names))
	if err := sweeper.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		s := &corev1.Secret{}
		if err := c().Get(ctx, client.ObjectKey{Namespace: testenv.SystemNamespace, Name: name}, s); err != nil {
			t.Fatalf("Secret %s, which %s references, was not restored: %v", name, cos.Name, err)
		}
		if diff := cmp.Diff(data[name], s.Data); diff != "" {
			t.Errorf("Secret %s restored with other data", name)
		}
	}
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
}

// TestWebhookOnlyModeReleasesOnlyOurFinalizer: a ClusterObjectSet finalized while rollout was on can
// still be deleted after the manager switched to --rollout=false; a finalizer of the same name that
// another reconciler (OLM's) added is left to it.
func TestWebhookOnlyModeReleasesOnlyOurFinalizer(t *testing.T) {
	ours := builders.COS("webhook-only-ours", builders.WithPhase("configuration",
		builders.Inline(builders.ConfigMap("default", "webhook-only-ours", nil))))
	create(t, ours)
	got := testenv.Env.WaitForCondition(t, ours.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	if !controllerutil.ContainsFinalizer(got, controllers.Finalizer) {
		t.Fatalf("no finalizer while rolling out: %v", got.Finalizers)
	}
	restart := func(args ...string) {
		t.Helper()
		if err := manager.Stop(); err != nil {
			t.Fatal(err)
		}
		mgr, err := startManager(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		manager = mgr
	}
	restart("--rollout=false")
	defer restart()

	theirs := builders.COS("webhook-only-theirs", builders.WithPhase("configuration",
		builders.Inline(builders.ConfigMap("default", "webhook-only-theirs", nil))))
	theirs.Finalizers = []string{controllers.Finalizer} // written by another field manager
	create(t, theirs)
	if err := c().Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	if err := c().Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "our ClusterObjectSet to be gone", func(ctx context.Context) (bool, string) {
		err := c().Get(ctx, client.ObjectKey{Name: ours.Name}, &olmv1.ClusterObjectSet{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	other := getCOS(t, theirs.Name)
	if !controllerutil.ContainsFinalizer(other, controllers.Finalizer) {
		t.Errorf("webhook-only mode removed a finalizer another reconciler added")
	}
	patch := client.MergeFrom(other.DeepCopy())
	controllerutil.RemoveFinalizer(other, controllers.Finalizer)
	if err := c().Patch(ctx, other, patch); err != nil {
		t.Fatal(err)
	}
}

// waitSecretsControlledBy waits until every object-data Secret cos references exists with cos as
// its controller and no owner reference to any of the stale uids, and returns them.
func waitSecretsControlledBy(t *testing.T, cos *olmv1.ClusterObjectSet, stale ...types.UID) []corev1.Secret {
	t.Helper()
	var secrets []corev1.Secret
	framework.Eventually(ctx, t, "the Secrets of "+cos.Name+" to be controlled by it", func(ctx context.Context) (bool, string) {
		secrets = secrets[:0]
		seen := map[string]bool{}
		for _, p := range cos.Spec.Phases {
			for _, o := range p.Objects {
				if !o.IsRef() || seen[o.Ref.Name] {
					continue
				}
				seen[o.Ref.Name] = true
				s := &corev1.Secret{}
				if err := c().Get(ctx, client.ObjectKey{Namespace: testenv.SystemNamespace, Name: o.Ref.Name}, s); err != nil {
					return false, err.Error()
				}
				if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != cos.UID {
					return false, fmt.Sprintf("Secret %s owners %v", s.Name, s.OwnerReferences)
				}
				for _, ref := range s.OwnerReferences {
					if slices.Contains(stale, ref.UID) {
						return false, fmt.Sprintf("Secret %s still refers to %s", s.Name, ref.UID)
					}
				}
				secrets = append(secrets, *s)
			}
		}
		return len(secrets) > 0, "no refs"
	})
	return secrets
}
