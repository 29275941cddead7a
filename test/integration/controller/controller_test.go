// Package controller_test rolls ClusterObjectSets out on a real control plane: the garbage collector
// of kube-controller-manager, Deployments made Available by the scheduler and kwok, and the manager
// (webhooks and reconciler) running in this process.
package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// clockShift is how far the reconciler's clock runs ahead, so that a 10-minute progress deadline has
// passed for every ClusterObjectSet the tests create. Only TestProgressDeadline sets a deadline.
const clockShift = 15 * time.Minute

type shiftedClock struct{ clock.RealClock }

func (shiftedClock) Now() time.Time                    { return time.Now().Add(clockShift) }
func (c shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

var manager *testenv.Manager

// externalRefCheck is the manager's --external-ref-check-interval in these tests (1 minute by
// default), so that a Secret replaced outside the system namespace is noticed within the tests' waits.
const externalRefCheck = "--external-ref-check-interval=2s"

func startManager(ctx context.Context, args ...string) (*testenv.Manager, error) {
	return testenv.Env.StartManagerWith(ctx, func(o *app.Options) { o.Clock = shiftedClock{} }, append([]string{externalRefCheck}, args...)...)
}

func TestMain(m *testing.M) {
	testenv.RunWithManager(m, &manager, func(ctx context.Context, env *testenv.Environment) (*testenv.Manager, error) {
		mgr, err := startManager(ctx)
		if err != nil {
			return nil, err
		}
		// Deletion tests wait for dependents to go: not for the collector to start watching the CRD.
		if err := env.WaitForGarbageCollector(ctx); err != nil {
			_ = mgr.Stop()
			return nil, err
		}
		return mgr, nil
	})
}

var ctx = context.Background()

func c() client.Client { return testenv.Env.Client }

func getCOS(t *testing.T, name string) *olmv1.ClusterObjectSet {
	t.Helper()
	cos := &olmv1.ClusterObjectSet{}
	if err := c().Get(ctx, client.ObjectKey{Name: name}, cos); err != nil {
		t.Fatal(err)
	}
	return cos
}

func create(t *testing.T, cos *olmv1.ClusterObjectSet) {
	t.Helper()
	if err := c().Create(ctx, cos); err != nil {
		t.Fatalf("creating %s: %v", cos.Name, err)
	}
}

func deployment(ns, name, image string, nodeSelector map[string]string) *unstructured.Unstructured {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:   []corev1.Container{{Name: "main", Image: image}},
					NodeSelector: nodeSelector,
				},
			},
		},
	}
	u, err := toUnstructured(d)
	if err != nil {
		panic(err)
	}
	return u
}

func toUnstructured(o any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return u, nil
}

func TestArgoCDRollsOutPhaseByPhase(t *testing.T) {
	testenv.Env.EnsureNamespace(t, "argocd")
	cos, err := builders.Bundle("argocd-rollout", "argocd-install", "argocd")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Env.Fresh(t, cos.Name)
	create(t, cos)
	got := testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
	if !apimeta.IsStatusConditionTrue(got.Status.Conditions, olmv1.ConditionAvailable) {
		t.Errorf("Succeeded but not Available: %s", testenv.Conditions(got))
	}
	// Phases completed in spec order.
	if len(got.Status.ObservedPhases) != len(got.Spec.Phases) {
		t.Fatalf("observedPhases %d, phases %d", len(got.Status.ObservedPhases), len(got.Spec.Phases))
	}
	for i := 1; i < len(got.Status.ObservedPhases); i++ {
		prev, cur := got.Status.ObservedPhases[i-1], got.Status.ObservedPhases[i]
		if cur.CompletedAt.Before(&prev.CompletedAt) {
			t.Errorf("phase %s completed before phase %s", cur.Name, prev.Name)
		}
	}
	// Every object carries the controller reference and the owning-revision label.
	server := &appsv1.Deployment{}
	if err := c().Get(ctx, client.ObjectKey{Namespace: "argocd", Name: "argocd-server"}, server); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(server); ref == nil || ref.UID != got.UID {
		t.Errorf("argocd-server controller reference %v, want %s", ref, got.UID)
	}
	if server.Labels[olmv1.LabelOwningRevision] != naming.RevisionLabelValue(got.Name) {
		t.Errorf("argocd-server labels %v", server.Labels)
	}
}

func TestCRDsEstablishedBeforeTheNextPhase(t *testing.T) {
	testenv.Env.EnsureNamespace(t, "monitoring")
	cos, err := builders.Bundle("prometheus-crds", "prometheus-operator-crds", "monitoring",
		builders.WithPhase("after", builders.Inline(builders.ConfigMap("monitoring", "after-crds", map[string]string{"a": "b"}))))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Env.Fresh(t, cos.Name)
	create(t, cos)
	got := testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
	after := &corev1.ConfigMap{}
	if err := c().Get(ctx, client.ObjectKey{Namespace: "monitoring", Name: "after-crds"}, after); err != nil {
		t.Fatal(err)
	}
	if crds := got.Status.ObservedPhases[0]; crds.Name != "crds" || crds.CompletedAt.IsZero() {
		t.Errorf("the first observed phase is %s, completed at %s: want crds, completed", crds.Name, crds.CompletedAt)
	}
	// Each CRD became Established before the next phase's ConfigMap was created, both by the API
	// server's clock at a 1 s resolution. (The phase's completedAt is no witness: it is stamped when
	// the reconcile that saw it complete writes its status, after applying the next phase.)
	inline, err := builders.Bundle("prometheus-crds", "prometheus-operator-crds", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range inline.Spec.Phases[0].Objects {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Name: o.Object.GetName()}, crd); err != nil {
			t.Fatal(err)
		}
		var established *apiextensionsv1.CustomResourceDefinitionCondition
		for i, cnd := range crd.Status.Conditions {
			if cnd.Type == apiextensionsv1.Established && cnd.Status == apiextensionsv1.ConditionTrue {
				established = &crd.Status.Conditions[i]
			}
		}
		switch {
		case established == nil:
			t.Errorf("CRD %s not Established", crd.Name)
		case after.CreationTimestamp.Before(&established.LastTransitionTime):
			t.Errorf("the next phase's ConfigMap was created at %s, before CRD %s was Established at %s",
				after.CreationTimestamp, crd.Name, established.LastTransitionTime)
		}
	}
}

func TestRevisionHandover(t *testing.T) {
	ns := "handover"
	testenv.Env.EnsureNamespace(t, ns)
	testenv.Env.Fresh(t, "handover-2", "handover-1")
	owner := map[string]string{olmv1.LabelOwnerName: "handover-app"}
	keep := builders.ConfigMap(ns, "kept", map[string]string{"a": "1"})
	removed := builders.ConfigMap(ns, "removed", map[string]string{"b": "2"})
	rev1 := builders.COS("handover-1", builders.WithLabels(owner),
		builders.WithPhase("configuration", builders.Inline(keep), builders.Inline(removed)),
		builders.WithPhase("deploy", builders.Inline(deployment(ns, "web", "example.invalid/web:1", nil))))
	create(t, rev1)
	r1 := testenv.Env.WaitForCondition(t, rev1.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	keptBefore := &corev1.ConfigMap{}
	if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, keptBefore); err != nil {
		t.Fatal(err)
	}

	rev2 := builders.COS("handover-2", builders.WithRevision(2), builders.WithLabels(owner),
		builders.WithPhase("configuration", builders.Inline(keep)),
		builders.WithPhase("deploy", builders.Inline(deployment(ns, "web", "example.invalid/web:2", nil))))
	create(t, rev2)
	r2 := testenv.Env.WaitForCondition(t, rev2.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	testenv.Env.WaitForCondition(t, rev1.Name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonArchived)
	if getCOS(t, rev1.Name).Spec.LifecycleState != olmv1.LifecycleStateArchived {
		t.Error("revision 1 not archived")
	}
	framework.Eventually(ctx, t, "the removed ConfigMap to be deleted", func(ctx context.Context) (bool, string) {
		err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "removed"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	kept := &corev1.ConfigMap{}
	if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, kept); err != nil {
		t.Fatal(err)
	}
	if kept.UID != keptBefore.UID {
		t.Error("the kept ConfigMap was recreated instead of handed over")
	}
	if ref := metav1.GetControllerOf(kept); ref == nil || ref.UID != r2.UID {
		t.Errorf("kept ConfigMap controller %v, want revision 2", ref)
	}
	for _, ref := range kept.OwnerReferences {
		if ref.UID == r1.UID {
			t.Error("revision 1 still owns the kept ConfigMap")
		}
	}
	web := &appsv1.Deployment{}
	if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, web); err != nil {
		t.Fatal(err)
	}
	if img := web.Spec.Template.Spec.Containers[0].Image; img != "example.invalid/web:2" {
		t.Errorf("image %s after handover", img)
	}
}

func TestCollisionProtection(t *testing.T) {
	ns := "collisions"
	testenv.Env.EnsureNamespace(t, ns)
	// Order matters: the adopting cases take the objects over, so the refusing cases run first.
	order := []string{"Prevent, no controller", "Prevent, controlled", "IfNoController, controlled", "IfNoController, no controller", "None, controlled"}
	cosName := func(name string) string {
		return "collide-" + strings.ToLower(strings.NewReplacer(" ", "", ",", "-").Replace(name))
	}
	// What an earlier run (-count) left: the revisions (their teardown deletes what they adopted),
	// then the ConfigMaps.
	for _, name := range order {
		testenv.Env.Fresh(t, cosName(name))
	}
	// A pre-existing ConfigMap without a controller, and one controlled by another owner.
	free := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "free"}}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "some-owner"}}
	controlled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "controlled"}}
	for _, o := range []*corev1.ConfigMap{free, owner, controlled} {
		framework.Delete(ctx, t, c(), o)
	}
	for _, o := range []*corev1.ConfigMap{free, owner} {
		if err := c().Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	controlled.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	if err := c().Create(ctx, controlled); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		protection olmv1.CollisionProtection
		target     string
		succeed    bool
	}{
		"Prevent, no controller":        {olmv1.CollisionProtectionPrevent, "free", false},
		"Prevent, controlled":           {olmv1.CollisionProtectionPrevent, "controlled", false},
		"IfNoController, controlled":    {olmv1.CollisionProtectionIfNoController, "controlled", false},
		"IfNoController, no controller": {olmv1.CollisionProtectionIfNoController, "free", true},
		"None, controlled":              {olmv1.CollisionProtectionNone, "controlled", true},
	}
	for _, name := range order {
		tc := tests[name]
		t.Run(name, func(t *testing.T) {
			cosName := cosName(name)
			cos := builders.COS(cosName, builders.WithCollisionProtection(tc.protection),
				builders.WithPhase("configuration", builders.Inline(builders.ConfigMap(ns, tc.target, map[string]string{"by": cosName}))))
			create(t, cos)
			if tc.succeed {
				got := testenv.Env.WaitForCondition(t, cosName, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
				cm := &corev1.ConfigMap{}
				if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.target}, cm); err != nil {
					t.Fatal(err)
				}
				if ref := metav1.GetControllerOf(cm); ref == nil || ref.UID != got.UID {
					t.Errorf("controller after adoption: %v", ref)
				}
			} else {
				got := testenv.Env.WaitForCondition(t, cosName, olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonRetrying)
				msg := apimeta.FindStatusCondition(got.Status.Conditions, olmv1.ConditionProgressing).Message
				if !strings.HasPrefix(msg, "revision object collisions in phase 0\nObject ConfigMap.v1 "+ns+"/"+tc.target+"\nAction: \"Collision\"\n") {
					t.Errorf("collision message %q does not name the object", msg)
				}
			}
			// Clean up without touching the target: remove the revision.
			_ = c().Delete(ctx, cos)
		})
	}
}

func TestMissingSecretThenCreated(t *testing.T) {
	cm := builders.ConfigMap("default", "from-late-secret", map[string]string{"a": "b"})
	data, err := content.Canonical(cm.Object)
	if err != nil {
		t.Fatal(err)
	}
	key := content.Key(data)
	cos := builders.COS("late-secret", builders.WithPhase("configuration", builders.Ref("late-secret-data", "", key)))
	testenv.Env.Fresh(t, cos.Name)
	create(t, cos)
	got := testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonRetrying)
	if msg := apimeta.FindStatusCondition(got.Status.Conditions, olmv1.ConditionProgressing).Message; !strings.Contains(msg, "late-secret-data") {
		t.Errorf("Retrying message %q does not name the Secret", msg)
	}
	sec := objectDataSecret("late-secret-data", cos.Name, map[string][]byte{key: data})
	if err := c().Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	// The Secret is now owned by the ClusterObjectSet.
	framework.Eventually(ctx, t, "the Secret's owner reference", func(ctx context.Context) (bool, string) {
		s := &corev1.Secret{}
		if err := c().Get(ctx, client.ObjectKeyFromObject(sec), s); err != nil {
			return false, err.Error()
		}
		ref := metav1.GetControllerOf(s)
		return ref != nil && ref.UID == got.UID, fmt.Sprint(s.OwnerReferences)
	})
}

func objectDataSecret(name, cosName string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: name,
			Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue(cosName)}},
		Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: data,
	}
}

func TestReplacedSecretBlocksAndRecovers(t *testing.T) {
	cm := builders.ConfigMap("default", "guarded", map[string]string{"a": "b"})
	data, _ := content.Canonical(cm.Object)
	// A plain (not content-addressed) key: only the latched phase digest can notice a change.
	cos := builders.COS("replaced-secret", builders.WithPhase("configuration", builders.Ref("replaced-secret-data", "", "manifest")))
	sec := objectDataSecret("replaced-secret-data", cos.Name, map[string][]byte{"manifest": data})
	if err := c().Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteSecret(t, client.ObjectKeyFromObject(sec)) })
	create(t, cos)
	testenv.Env.RemoveAfter(t, cos.Name)
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")

	replace := func(d []byte) {
		t.Helper()
		old := &corev1.Secret{}
		if err := c().Get(ctx, client.ObjectKeyFromObject(sec), old); err != nil {
			t.Fatal(err)
		}
		// The Secret guard refuses to delete a referenced Secret, but exempts the manager's own user,
		// which here is the test's admin user.
		if err := c().Delete(ctx, old); err != nil {
			t.Fatalf("deleting the Secret: %v", err)
		}
		fresh := objectDataSecret(sec.Name, cos.Name, map[string][]byte{"manifest": d})
		if err := c().Create(ctx, fresh); err != nil {
			t.Fatal(err)
		}
	}
	changed := builders.ConfigMap("default", "guarded", map[string]string{"a": "value-after-9d2e"})
	changedData, _ := content.Canonical(changed.Object)
	replace(changedData)
	got := testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonBlocked)
	msg := apimeta.FindStatusCondition(got.Status.Conditions, olmv1.ConditionProgressing).Message
	if !strings.HasPrefix(msg, `resolved content of 1 phase(s) has changed: phase "configuration" (expected digest sha256:`) || strings.Contains(msg, "value-after-9d2e") {
		t.Errorf("Blocked message %q: want the phase named and no content", msg)
	}
	framework.Eventually(ctx, t, "a Blocked Event", func(ctx context.Context) (bool, string) {
		events := &eventsv1.EventList{}
		if err := c().List(ctx, events); err != nil {
			return false, err.Error()
		}
		blocked := false
		for _, e := range events.Items {
			if e.Regarding.Name != cos.Name {
				continue
			}
			if strings.Contains(e.Note, "value-after-9d2e") {
				t.Errorf("Event %s quotes the Secret's content: %q", e.Reason, e.Note)
			}
			blocked = blocked || (e.Reason == controllers.EventBlocked && e.Type == corev1.EventTypeWarning)
		}
		return blocked, fmt.Sprintf("%d events", len(events.Items))
	})
	replace(data)
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonSucceeded)
}

func TestProgressDeadline(t *testing.T) {
	ns := "deadline"
	testenv.Env.EnsureNamespace(t, ns)
	testenv.Env.Fresh(t, "deadline")
	unlabelNode(t, "deadline")
	// The Deployment's Pod can only run on a node labelled deadline=ok: none is, yet.
	cos := builders.COS("deadline", builders.WithProgressDeadline(10),
		builders.WithPhase("deploy", builders.Inline(deployment(ns, "waits", "example.invalid/waits:1", map[string]string{"deadline": "ok"}))))
	create(t, cos)
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonProgressDeadlineExceeded)
	labelNode(t, "deadline", "ok")
	got := testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	if cond := apimeta.FindStatusCondition(got.Status.Conditions, olmv1.ConditionProgressing); cond.Status != metav1.ConditionTrue || cond.Reason != olmv1.ReasonSucceeded {
		t.Errorf("after recovery Progressing is %s/%s", cond.Status, cond.Reason)
	}
}

func labelNode(t *testing.T, key, value string) {
	t.Helper()
	patchNodeLabel(t, key, value)
}

// unlabelNode removes the node's label key, which an earlier run (-count) set.
func unlabelNode(t *testing.T, key string) {
	t.Helper()
	patchNodeLabel(t, key, nil)
}

// patchNodeLabel sets the node's label key to value, or removes it when value is nil.
func patchNodeLabel(t *testing.T, key string, value any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: controlplane.NodeName}}
	if err := c().Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

func TestManagerRestartMidRollout(t *testing.T) {
	ns := "restart"
	testenv.Env.EnsureNamespace(t, ns)
	testenv.Env.Fresh(t, "restart")
	unlabelNode(t, "restart")
	cos := builders.COS("restart", builders.WithPhase("configuration", builders.Inline(builders.ConfigMap(ns, "first", nil))),
		builders.WithPhase("deploy", builders.Inline(deployment(ns, "waits", "example.invalid/waits:1", map[string]string{"restart": "ok"}))),
		builders.WithPhase("publish", builders.Inline(builders.ConfigMap(ns, "last", nil))))
	create(t, cos)
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionAvailable, metav1.ConditionFalse, olmv1.ReasonProbeFailure)
	if err := manager.Stop(); err != nil {
		t.Fatal(err)
	}
	labelNode(t, "restart", "ok")
	mgr, err := startManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	manager = mgr
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "last"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("last phase not applied: %v", err)
	}
}

func TestOrphanSweep(t *testing.T) {
	old := objectDataSecret("orphan-old", "never-created", map[string][]byte{"k": []byte("{}")})
	if err := c().Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	// The young orphan claims, in its last-used annotation (which earlier releases wrote), a use ten
	// minutes from now (another replica's clock ahead): the sweep reads no clock but its own.
	young := objectDataSecret("orphan-young", "never-created-either", map[string][]byte{"k": []byte("{}")})
	young.Annotations = map[string]string{content.LastUsedAnnotation: time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)}
	if err := c().Create(ctx, young); err != nil {
		t.Fatal(err)
	}
	// A ClusterObjectSet whose Secret it references must survive any sweep.
	testenv.Env.RemoveAfter(t, "sweep-keeps")
	kept := builders.COS("sweep-keeps", builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", "sweep-keeps", 2)...))
	create(t, kept)
	ref := getCOS(t, kept.Name).Spec.Phases[0].Objects[0].Ref

	// A sweeper whose clock is an hour ahead of the API server's deletes nothing on its first look:
	// a grace period starts when the sweep first sees a Secret unused, on its own clock.
	clk := testingclock.NewFakePassiveClock(time.Now().Add(time.Hour))
	sweeper := newSweeper(clk)
	waitSeenUnused(t, sweeper, old, young)
	for _, s := range []*corev1.Secret{old, young} {
		if err := c().Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{}); err != nil {
			t.Errorf("Secret %s was swept on the sweep's first look: %v", s.Name, err)
		}
	}
	// The young one is written within the grace period (as earlier releases' touch did, or any
	// client): that keeps nobody's Secret from expiring. Both go once the grace period has passed.
	touch(t, young)
	clk.SetTime(clk.Now().Add(5 * time.Minute))
	waitSwept(t, sweeper, "the orphan seen unused for its grace period", old)
	waitSwept(t, sweeper, "the orphan written within its grace period", young)
	if err := c().Get(ctx, client.ObjectKey{Namespace: testenv.SystemNamespace, Name: ref.Name}, &corev1.Secret{}); err != nil {
		t.Errorf("a referenced Secret was swept: %v", err)
	}
	// Each was copied before it was deleted; nobody references them, so the copies go once the
	// restore window has passed, and not before.
	for _, s := range []*corev1.Secret{old, young} {
		if q := quarantineOf(t, s); q == nil {
			t.Errorf("no quarantine copy of swept Secret %s", s.Name)
		}
	}
	clk.SetTime(clk.Now().Add(sweeper.RestoreWindow - time.Second))
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{old, young} {
		if q := quarantineOf(t, s); q == nil {
			t.Errorf("the quarantine copy of %s went before its restore window had passed", s.Name)
		}
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{old, young} {
		if q := quarantineOf(t, s); q != nil {
			t.Errorf("the quarantine copy of %s outlived its restore window", s.Name)
		}
	}
}

// TestOrphanSweepCarriesOnAcrossLeaders: the sweep keeps how long it has seen each Secret unused in
// the cluster, so a new leader (another process, another clock) carries on where the last one
// stopped: a leader change costs one interval, not the whole grace period.
func TestOrphanSweepCarriesOnAcrossLeaders(t *testing.T) {
	orphan := objectDataSecret(fmt.Sprintf("orphan-leaders-%d", time.Now().UnixNano()%1e6), "never-created", map[string][]byte{"k": []byte("{}")})
	if err := c().Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	first := testingclock.NewFakePassiveClock(time.Now())
	a := newSweeper(first)
	waitSeenUnused(t, a, orphan)
	first.SetTime(first.Now().Add(4 * time.Minute))
	if _, err := a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	// The next leader's clock is a day behind: it compares no time with the first one's.
	second := testingclock.NewFakePassiveClock(time.Now().Add(-24 * time.Hour))
	b := newSweeper(second)
	waitSeenUnused(t, b, orphan)
	if err := c().Get(ctx, client.ObjectKeyFromObject(orphan), &corev1.Secret{}); err != nil {
		t.Fatalf("the new leader swept the Secret on its first look: %v", err)
	}
	second.SetTime(second.Now().Add(time.Minute))
	waitSwept(t, b, "the orphan, 4 minutes on the first leader and 1 on the second", orphan)
}

// TestOrphanSweepFinishesWhatADeadLeaderLeft: a leader that died after copying a Secret, or after
// deleting it, leaves a quarantine copy; the next one deletes the Secret if it is still due, creates
// it again if a ClusterObjectSet references it, and lets the copy go after its own restore window.
func TestOrphanSweepFinishesWhatADeadLeaderLeft(t *testing.T) {
	suffix := time.Now().UnixNano() % 1e6
	copied := objectDataSecret(fmt.Sprintf("dead-leader-copied-%d", suffix), "never-created", map[string][]byte{"k": []byte("{}")})
	deleted := objectDataSecret(fmt.Sprintf("dead-leader-deleted-%d", suffix), "never-created", map[string][]byte{"k": []byte(`{"a":"b"}`)})
	for _, s := range []*corev1.Secret{copied, deleted} {
		if err := c().Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := c().Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			t.Fatal(err)
		}
		// The dead leader's steps: the copy of each, then the delete of one.
		if err := c().Create(ctx, secretdata.Quarantine(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c().Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	// A refs-only create lands meanwhile, naming the deleted Secret (admitted while it existed).
	user := fmt.Sprintf("dead-leader-user-%d", suffix)
	testenv.Env.RemoveAfter(t, user)
	create(t, builders.COS(user, builders.WithPhase("configuration", builders.Ref(deleted.Name, "", "k"))))

	clk := testingclock.NewFakePassiveClock(time.Now())
	sweeper := newSweeper(clk)
	framework.Eventually(ctx, t, "the deleted Secret to be created again from its copy", func(ctx context.Context) (bool, string) {
		if _, err := sweeper.Sweep(ctx); err != nil {
			return false, err.Error()
		}
		got := &corev1.Secret{}
		if err := c().Get(ctx, client.ObjectKeyFromObject(deleted), got); err != nil {
			return false, err.Error()
		}
		if diff := cmp.Diff(deleted.Data, got.Data); diff != "" {
			return false, "restored with other data"
		}
		return got.Labels[olmv1.LabelRevisionName] == deleted.Labels[olmv1.LabelRevisionName] && got.Type == olmv1.SecretTypeObjectData, fmt.Sprintf("labels %v type %s", got.Labels, got.Type)
	})
	if q := quarantineOf(t, deleted); q != nil {
		t.Error("the copy of the restored Secret was kept")
	}
	if m := (&dto.Metric{}); sweeper.Metrics.SecretsRestored.Write(m) != nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("secrets restored = %v, want 1", m.GetCounter().GetValue())
	}
	// The copied one is still unused: seen for a grace period, it is deleted (its copy found, not
	// written again), and the copy goes after the window.
	waitSeenUnused(t, sweeper, copied)
	clk.SetTime(clk.Now().Add(sweeper.GracePeriod))
	waitSwept(t, sweeper, "the Secret the dead leader copied", copied)
	clk.SetTime(clk.Now().Add(sweeper.RestoreWindow))
	framework.Eventually(ctx, t, "the copy to go after the window", func(ctx context.Context) (bool, string) {
		if _, err := sweeper.Sweep(ctx); err != nil {
			return false, err.Error()
		}
		return quarantineOf(t, copied) == nil, "copy still there"
	})
}

// quarantineOf returns the quarantine copy of s (by its uid), or nil.
func quarantineOf(t *testing.T, s *corev1.Secret) *corev1.Secret {
	t.Helper()
	uid := s.UID
	if uid == "" {
		t.Fatalf("Secret %s has no uid: read it after creating it", s.Name)
	}
	q := &corev1.Secret{}
	err := c().Get(ctx, client.ObjectKey{Namespace: testenv.SystemNamespace, Name: secretdata.QuarantineName(uid)}, q)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// newSweeper is an orphan sweep of the system namespace with metrics of its own, a 5-minute grace
// period and a 2-minute restore window, on clk (nil: the real clock), confirming its candidates with a live list.
func newSweeper(clk clock.PassiveClock) *controllers.OrphanSweeper {
	return &controllers.OrphanSweeper{Metrics: controllers.NewMetrics(), Client: c(), APIReader: c(), SystemNamespace: testenv.SystemNamespace,
		GracePeriod: 5 * time.Minute, RestoreWindow: 2 * time.Minute, Clock: clk}
}

// secretsAt are the Secrets of keys, by name only.
func secretsAt(keys []client.ObjectKey) []*corev1.Secret {
	var secrets []*corev1.Secret
	for _, key := range keys {
		secrets = append(secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	}
	return secrets
}

// unowned reports whether none of the Secrets of keys has an owner (a condition of
// framework.Eventually).
func unowned(ctx context.Context, keys []client.ObjectKey) (bool, string) {
	for _, key := range keys {
		s := &corev1.Secret{}
		if err := c().Get(ctx, key, s); err != nil {
			return false, err.Error()
		}
		if len(s.OwnerReferences) > 0 {
			return false, fmt.Sprintf("Secret %s owners %v", s.Name, s.OwnerReferences)
		}
	}
	return true, ""
}

// waitSwept runs the sweep until s is gone.
func waitSwept(t *testing.T, sweeper *controllers.OrphanSweeper, what string, s *corev1.Secret) {
	t.Helper()
	framework.Eventually(ctx, t, what+" to be swept", func(ctx context.Context) (bool, string) {
		if _, err := sweeper.Sweep(ctx); err != nil {
			return false, err.Error()
		}
		err := c().Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// waitSeenUnused sweeps until the sweeper has seen each of the Secrets unused (the cache it reads may
// not hold a write of a moment ago yet). It fills in each Secret's uid.
func waitSeenUnused(t *testing.T, sweeper *controllers.OrphanSweeper, secrets ...*corev1.Secret) {
	t.Helper()
	framework.Eventually(ctx, t, "the sweep to see the Secrets unused", func(ctx context.Context) (bool, string) {
		if _, err := sweeper.Sweep(ctx); err != nil {
			return false, err.Error()
		}
		for _, s := range secrets {
			cur := &corev1.Secret{}
			if err := c().Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
				return false, err.Error()
			}
			s.UID = cur.UID
			if !sweeper.SeenUnused(cur.UID) {
				return false, fmt.Sprintf("Secret %s not seen unused", s.Name)
			}
		}
		return true, ""
	})
}

// touch writes the Secret as earlier releases' admissions did (a new last-used time): any write.
func touch(t *testing.T, s *corev1.Secret) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, content.LastUsedAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	if err := c().Patch(ctx, s.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// sweepTwice runs the sweep on a clock of its own, then again a grace period later.
func sweepTwice(t *testing.T, sweeper *controllers.OrphanSweeper) {
	t.Helper()
	clk := testingclock.NewFakePassiveClock(time.Now())
	sweeper.Clock = clk
	for range 2 {
		if _, err := sweeper.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		clk.SetTime(clk.Now().Add(sweeper.GracePeriod))
	}
}

// sweepAfterGrace runs the sweep as the manager's does over time, on a clock of its own: until it
// has seen the Secrets unused, then a grace period later until none of them is left.
func sweepAfterGrace(t *testing.T, sweeper *controllers.OrphanSweeper, secrets ...*corev1.Secret) {
	t.Helper()
	clk := testingclock.NewFakePassiveClock(time.Now())
	sweeper.Clock = clk
	waitSeenUnused(t, sweeper, secrets...)
	clk.SetTime(clk.Now().Add(sweeper.GracePeriod))
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDeletionRemovesObjectsAndSecrets(t *testing.T) {
	ns := "deletion"
	testenv.Env.EnsureNamespace(t, ns)
	cos := builders.COS("deletion", builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithPhase("configuration", builders.InlineConfigMaps(ns, "gone", 3)...),
		builders.WithPhase("deploy", builders.Inline(deployment(ns, "gone", "example.invalid/gone:1", nil))))
	create(t, cos)
	got := testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	secretName := got.Spec.Phases[0].Objects[0].Ref.Name
	framework.Eventually(ctx, t, "the Secret to be owned", func(ctx context.Context) (bool, string) {
		s := &corev1.Secret{}
		if err := c().Get(ctx, client.ObjectKey{Namespace: testenv.SystemNamespace, Name: secretName}, s); err != nil {
			return false, err.Error()
		}
		return metav1.GetControllerOf(s) != nil, fmt.Sprint(s.OwnerReferences)
	})
	if err := c().Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "the ClusterObjectSet, its objects and its Secrets to be gone", func(ctx context.Context) (bool, string) {
		var left []string
		if err := c().Get(ctx, client.ObjectKey{Name: cos.Name}, &olmv1.ClusterObjectSet{}); !apierrors.IsNotFound(err) {
			left = append(left, "ClusterObjectSet")
		}
		if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			left = append(left, "Deployment")
		}
		for i := range 3 {
			if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("gone-%d", i)}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("ConfigMap gone-%d", i))
			}
		}
		if err := c().Get(ctx, client.ObjectKey{Namespace: testenv.SystemNamespace, Name: secretName}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			left = append(left, "Secret "+secretName)
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
}

func TestKeepsFiveArchivedRevisions(t *testing.T) {
	owner := map[string]string{olmv1.LabelOwnerName: "many-revisions"}
	testenv.Env.Fresh(t, "many-7", "many-6", "many-5", "many-4", "many-3", "many-2", "many-1")
	for rev := int64(1); rev <= 7; rev++ {
		cos := builders.COS(fmt.Sprintf("many-%d", rev), builders.WithRevision(rev), builders.WithLabels(owner),
			builders.WithPhase("configuration", builders.Inline(builders.ConfigMap("default", "many", map[string]string{"rev": fmt.Sprint(rev)}))))
		create(t, cos)
		testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	}
	framework.Eventually(ctx, t, "revisions 2 to 6 archived, 1 deleted, 7 active", func(ctx context.Context) (bool, string) {
		list := &olmv1.ClusterObjectSetList{}
		if err := c().List(ctx, list, client.MatchingLabels(owner)); err != nil {
			return false, err.Error()
		}
		var got []string
		for _, item := range list.Items {
			got = append(got, fmt.Sprintf("%d:%s", item.Spec.Revision, item.Spec.LifecycleState))
		}
		want := "2:Archived 3:Archived 4:Archived 5:Archived 6:Archived 7:Active"
		return strings.Join(got, " ") == want, strings.Join(got, " ")
	})
	cm := &corev1.ConfigMap{}
	if err := c().Get(ctx, client.ObjectKey{Namespace: "default", Name: "many"}, cm); err != nil || cm.Data["rev"] != "7" {
		t.Errorf("the ConfigMap after seven revisions: %v %v", cm.Data, err)
	}
}
