package controller_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/phasedigest"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestDriftIsRestored changes, as another client would, fields the reconciler applied to a rolled-out
// ClusterObjectSet's objects, and waits for each to be restored. The drift check interval is 10
// minutes and the wait at most two: the watch events of the changes do it.
func TestDriftIsRestored(t *testing.T) {
	ns := "drift"
	testenv.Env.EnsureNamespace(t, ns)
	cm := builders.ConfigMap(ns, "settings", map[string]string{"mode": "fast"})
	cm.SetLabels(map[string]string{"team": "platform"})
	cm.SetAnnotations(map[string]string{"owner": "team-a"})
	web := deployment(ns, "web", "example.invalid/web:1", nil)
	web.SetLabels(map[string]string{"tier": "frontend"})
	cos := builders.COS("drift", builders.WithPhase("configuration", builders.Inline(cm)),
		builders.WithPhase("deploy", builders.Inline(web)))
	create(t, cos)
	testenv.Env.RemoveAfter(t, cos.Name)
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)

	configMap := func() client.Object { return &corev1.ConfigMap{} }
	deploy := func() client.Object { return &appsv1.Deployment{} }
	tests := map[string]struct {
		newObj   func() client.Object
		name     string
		patch    string // JSON merge patch applied by "someone else"
		restored func(client.Object) (bool, string)
	}{
		"a label removed": {configMap, "settings", `{"metadata":{"labels":{"team":null}}}`, func(o client.Object) (bool, string) {
			return o.GetLabels()["team"] == "platform", fmt.Sprint(o.GetLabels())
		}},
		// No label value is compared: the change takes the label from our field manager.
		"a label changed": {configMap, "settings", `{"metadata":{"labels":{"team":"intruder"}}}`, func(o client.Object) (bool, string) {
			return o.GetLabels()["team"] == "platform", fmt.Sprint(o.GetLabels())
		}},
		"the owning-revision label removed": {deploy, "web", `{"metadata":{"labels":{"` + olmv1.LabelOwningRevision + `":null}}}`, func(o client.Object) (bool, string) {
			return o.GetLabels()[olmv1.LabelOwningRevision] != "", fmt.Sprint(o.GetLabels())
		}},
		"an annotation changed": {configMap, "settings", `{"metadata":{"annotations":{"owner":"intruder"}}}`, func(o client.Object) (bool, string) {
			return o.GetAnnotations()["owner"] == "team-a", fmt.Sprint(o.GetAnnotations())
		}},
		"a data field changed": {configMap, "settings", `{"data":{"mode":"slow"}}`, func(o client.Object) (bool, string) {
			return o.(*corev1.ConfigMap).Data["mode"] == "fast", fmt.Sprint(o.(*corev1.ConfigMap).Data)
		}},
		"a spec field changed": {deploy, "web", `{"spec":{"replicas":3}}`, func(o client.Object) (bool, string) {
			r := o.(*appsv1.Deployment).Spec.Replicas
			return r != nil && *r == 1, fmt.Sprint(*r)
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			target := tc.newObj()
			target.SetNamespace(ns)
			target.SetName(tc.name)
			if err := c().Patch(ctx, target, client.RawPatch(types.MergePatchType, []byte(tc.patch)), client.FieldOwner("someone-else")); err != nil {
				t.Fatal(err)
			}
			if ok, got := tc.restored(target); ok {
				t.Fatalf("the patch changed nothing: %s", got)
			}
			framework.Eventually(ctx, t, name+" to be restored", func(ctx context.Context) (bool, string) {
				live := tc.newObj()
				if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.name}, live); err != nil {
					return false, err.Error()
				}
				return tc.restored(live)
			})
		})
	}
}

// upstreamPhaseDigest is operator-controller's computePhaseDigest written out from its definition:
// "sha256:" and the hex SHA-256 of encoding/json's Marshal of {"name": phase, "objects": objects}.
func upstreamPhaseDigest(t *testing.T, phase string, objects []*unstructured.Unstructured) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"name": phase, "objects": objects})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestObservedPhasesReadableByUpstream checks the digests the reconciler latches against upstream's
// definition, so that OLM's reconciler verifies them after a switch instead of blocking.
func TestObservedPhasesReadableByUpstream(t *testing.T) {
	ns := "digests"
	testenv.Env.EnsureNamespace(t, ns)
	cos := builders.COS("digests",
		builders.WithPhase("configuration", builders.InlineConfigMaps(ns, "digests", 3)...),
		builders.WithPhase("deploy", builders.Inline(deployment(ns, "web", "example.invalid/web:1", nil))))
	create(t, cos)
	testenv.Env.RemoveAfter(t, cos.Name)
	got := testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
	for i, p := range got.Spec.Phases {
		objs := make([]*unstructured.Unstructured, len(p.Objects))
		for j, o := range p.Objects {
			objs[j] = o.Object.DeepCopy()
		}
		if want := upstreamPhaseDigest(t, p.Name, objs); got.Status.ObservedPhases[i].Digest != want {
			t.Errorf("phase %q: digest %s, upstream computes %s", p.Name, got.Status.ObservedPhases[i].Digest, want)
		}
	}
}

// TestDigestsOfEarlierReleasesAreKept plays a ClusterObjectSet latched by an earlier release: its
// observedPhases hold a digest in that release's form, written while its ref's Secret is still
// missing (so nothing latches first). Once the Secret appears it rolls out, and the digest is kept
// as it is. A digest that matches neither form blocks.
func TestDigestsOfEarlierReleasesAreKept(t *testing.T) {
	ns := "legacy-digests"
	testenv.Env.EnsureNamespace(t, ns)
	cm := builders.ConfigMap(ns, "legacy", map[string]string{"a": "b"})
	data, err := content.Canonical(cm.Object)
	if err != nil {
		t.Fatal(err)
	}
	var resolved map[string]any
	if err := json.Unmarshal(data, &resolved); err != nil {
		t.Fatal(err)
	}
	legacy, err := phasedigest.Legacy([]map[string]any{resolved})
	if err != nil {
		t.Fatal(err)
	}
	key := content.Key(data)
	tests := map[string]struct {
		digest  string
		succeed bool
	}{
		"form of earlier releases": {digest: legacy, succeed: true},
		"neither form":             {digest: "sha256:0123456789abcdef"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cosName := "legacy-digests-" + strings.ReplaceAll(name, " ", "-")
			secretName := cosName + "-data"
			t.Cleanup(func() {
				_ = c().Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: secretName}})
			})
			cos := builders.COS(cosName, builders.WithPhase("configuration", builders.Ref(secretName, "", key)))
			create(t, cos)
			testenv.Env.RemoveAfter(t, cos.Name)
			testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonRetrying)
			patch := []byte(fmt.Sprintf(`{"status":{"observedPhases":[{"name":"configuration","digest":%q}]}}`, tc.digest))
			if err := c().Status().Patch(ctx, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: cos.Name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Fatal(err)
			}
			if err := c().Create(ctx, objectDataSecret(secretName, cos.Name, map[string][]byte{key: data})); err != nil {
				t.Fatal(err)
			}
			if !tc.succeed {
				testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonBlocked)
				return
			}
			got := testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
			if d := got.Status.ObservedPhases[0].Digest; d != legacy {
				t.Errorf("the digest of an earlier release was rewritten: %s, was %s", d, legacy)
			}
		})
	}
}
