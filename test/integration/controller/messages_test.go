package controller_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/phasedigest"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestConditionMessagesReadLikeUpstream sets up each situation upstream's e2e suite
// (operator-controller test/e2e/features/revision.feature) and reconciler report, and compares the
// condition message exactly with upstream's wording, observed values left out (docs/reconciler.md).
// The manager's clock runs 15 minutes ahead, so a 10-minute deadline has passed at creation.
func TestConditionMessagesReadLikeUpstream(t *testing.T) {
	ns := "messages"
	testenv.Env.EnsureNamespace(t, ns)
	type situation struct {
		// setup creates what the ClusterObjectSet needs besides itself and returns the COS, and
		// optionally an action to run once it reached the first wanted condition.
		setup func(t *testing.T, name string) *olmv1.ClusterObjectSet
		// condType, status and reason of the condition to wait for and compare.
		condType string
		status   metav1.ConditionStatus
		reason   string
		message  func(name string) string
	}
	pvc := func(name string) *unstructured.Unstructured {
		return object(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":%q,"namespace":%q},
			"spec":{"accessModes":["ReadWriteOnce"],"storageClassName":"","volumeName":"no-such-pv","resources":{"requests":{"storage":"1Mi"}}}}`, name, ns))
	}
	secretRef := func(t *testing.T, name string, immutable bool) olmv1.ClusterObjectSetObject {
		cm := builders.ConfigMap(ns, name, map[string]string{"key": "value"})
		data, err := content.Canonical(cm.Object)
		if err != nil {
			t.Fatal(err)
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-data"},
			Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(immutable), Data: map[string][]byte{"configmap": data}}
		if err := c().Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteSecret(t, client.ObjectKeyFromObject(sec)) })
		return builders.Ref(sec.Name, ns, "configmap")
	}
	tests := map[string]situation{
		"built-in probe failure (PersistentVolumeClaim not Bound)": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, builders.WithPhase("pvc", builders.Inline(pvc(name))),
					builders.WithPhase("configmap", builders.InlineConfigMaps(ns, name, 1)...))
			},
			condType: olmv1.ConditionAvailable, status: metav1.ConditionFalse, reason: olmv1.ReasonProbeFailure,
			message: func(name string) string {
				return fmt.Sprintf(`Object PersistentVolumeClaim.v1 %s/%s: value at key "status.phase" != "Bound"; expected: "Bound"`, ns, name)
			},
		},
		"progressionProbes failure (label selector, FieldValue)": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				cm := builders.ConfigMap(ns, name, map[string]string{"foo": "foo"})
				cm.SetLabels(map[string]string{"test-label": "foo"})
				return builders.COS(name, builders.WithProbes(olmv1.ProgressionProbe{
					Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchLabels: map[string]string{"test-label": "foo"}}},
					Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: "data.foo", Value: "bar"}}},
				}), builders.WithPhase("cm-1", builders.Inline(cm)))
			},
			condType: olmv1.ConditionAvailable, status: metav1.ConditionFalse, reason: olmv1.ReasonProbeFailure,
			message: func(name string) string {
				return fmt.Sprintf(`Object ConfigMap.v1 %s/%s: value at key "data.foo" != "bar"; expected: "bar"`, ns, name)
			},
		},
		"rolling out": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, builders.WithAnnotations(map[string]string{olmv1.AnnotationBundleVersion: "1.0.2"}),
					builders.WithPhase("pvc", builders.Inline(pvc(name))))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionTrue, reason: olmv1.ReasonRollingOut,
			message: func(string) string { return "Revision 1.0.2 is rolling out." },
		},
		"mutable Secret": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, builders.WithPhase("resources", secretRef(t, name, false)))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionFalse, reason: olmv1.ReasonBlocked,
			message: func(name string) string {
				return fmt.Sprintf("the following secrets are not immutable (referenced secrets must have immutable set to true): %s/%s-data", ns, name)
			},
		},
		"missing Secret": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, builders.WithPhase("resources", builders.Ref(name+"-data", ns, "configmap")))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionTrue, reason: olmv1.ReasonRetrying,
			message: func(name string) string {
				return fmt.Sprintf(`resolving ref in phase "resources": getting Secret %s/%s-data: secrets "%s-data" not found`, ns, name, name)
			},
		},
		"missing key": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				ref := secretRef(t, name, true)
				ref.Ref.Key = "no-such-key"
				return builders.COS(name, builders.WithPhase("resources", ref))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionTrue, reason: olmv1.ReasonRetrying,
			message: func(name string) string {
				return fmt.Sprintf(`resolving ref in phase "resources": key "no-such-key" not found in Secret %s/%s-data`, ns, name)
			},
		},
		"deadline exceeded": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, builders.WithProgressDeadline(10), builders.WithAnnotations(map[string]string{olmv1.AnnotationBundleVersion: "1.0.2"}),
					builders.WithPhase("pvc", builders.Inline(pvc(name))))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionFalse, reason: olmv1.ReasonProgressDeadlineExceeded,
			message: func(string) string {
				return "Revision has not rolled out for 10 minute(s). Last status: Revision 1.0.2 is rolling out."
			},
		},
		"succeeded": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, builders.WithAnnotations(map[string]string{olmv1.AnnotationBundleVersion: "1.0.0"}),
					builders.WithPhase("configmap", builders.InlineConfigMaps(ns, name, 1)...))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionTrue, reason: olmv1.ReasonSucceeded,
			message: func(string) string { return "Revision 1.0.0 has rolled out." },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cosName := "msg-" + strings.Trim(strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
					return r
				}
				return '-'
			}, strings.ToLower(name)), "-")
			cosName = strings.ReplaceAll(cosName, "--", "-")
			cos := tc.setup(t, cosName)
			create(t, cos)
			testenv.Env.RemoveAfter(t, cos.Name)
			got := testenv.Env.WaitForCondition(t, cos.Name, tc.condType, tc.status, tc.reason)
			if msg := apimeta.FindStatusCondition(got.Status.Conditions, tc.condType).Message; msg != tc.message(cosName) {
				t.Errorf("%s message\n got: %s\nwant: %s", tc.condType, msg, tc.message(cosName))
			}
		})
	}
}

// TestArchivedAndContentChangedMessages covers the two situations that need a rolled-out revision
// first: content changed behind a ref, and archival.
func TestArchivedAndContentChangedMessages(t *testing.T) {
	ns := "messages"
	testenv.Env.EnsureNamespace(t, ns)
	cm := builders.ConfigMap(ns, "msg-archived", map[string]string{"key": "value"})
	cos := builders.COS("msg-archived", builders.WithPhase("configmap", builders.Inline(cm)))
	create(t, cos)
	testenv.Env.RemoveAfter(t, cos.Name)
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
	patch := []byte(`{"spec":{"lifecycleState":"Archived"}}`)
	if err := c().Patch(ctx, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: cos.Name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	got := testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonArchived)
	for _, ct := range []string{olmv1.ConditionProgressing, olmv1.ConditionAvailable} {
		if msg := apimeta.FindStatusCondition(got.Status.Conditions, ct).Message; msg != "revision is archived" {
			t.Errorf("%s message %q, want %q", ct, msg, "revision is archived")
		}
	}

	// Content changed: a plain key, replaced after the rollout.
	before := builders.ConfigMap(ns, "msg-changed", map[string]string{"key": "value-before-1b7c"})
	after := builders.ConfigMap(ns, "msg-changed", map[string]string{"key": "value-after-1b7c"})
	data := func(u *unstructured.Unstructured) []byte {
		b, err := content.Canonical(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sec := objectDataSecret("msg-changed-data", "msg-changed", map[string][]byte{"configmap": data(before)})
	if err := c().Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteSecret(t, client.ObjectKeyFromObject(sec)) })
	changed := builders.COS("msg-changed", builders.WithPhase("resources", builders.Ref(sec.Name, "", "configmap")))
	create(t, changed)
	testenv.Env.RemoveAfter(t, changed.Name)
	rolled := testenv.Env.WaitForCondition(t, changed.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
	deleteSecret(t, client.ObjectKeyFromObject(sec))
	if err := c().Create(ctx, objectDataSecret(sec.Name, changed.Name, map[string][]byte{"configmap": data(after)})); err != nil {
		t.Fatal(err)
	}
	var resolved map[string]any
	if err := json.Unmarshal(data(after), &resolved); err != nil {
		t.Fatal(err)
	}
	now, err := phasedigest.Of("resources", []map[string]any{resolved})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`resolved content of 1 phase(s) has changed: phase "resources" (expected digest %s, got %s); a referenced object source may have been deleted and recreated with different content`,
		rolled.Status.ObservedPhases[0].Digest, now)
	blocked := testenv.Env.WaitForCondition(t, changed.Name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonBlocked)
	if msg := apimeta.FindStatusCondition(blocked.Status.Conditions, olmv1.ConditionProgressing).Message; msg != want {
		t.Errorf("Blocked message\n got: %s\nwant: %s", msg, want)
	}
}
