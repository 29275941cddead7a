package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestContentChangedAfterSucceededBlocks replaces, after the rollout succeeded, the Secret behind a
// ref with one of the same name and key but other content, as an admin restoring the wrong backup
// would, and waits for the ClusterObjectSet to turn Blocked naming the phase: in the system namespace
// (whose object-data Secrets are watched) and in a user namespace (re-read every
// --external-ref-check-interval), with and without a touch of the ClusterObjectSet (an annotation,
// which upstream's reconciler also reacts to).
func TestContentChangedAfterSucceededBlocks(t *testing.T) {
	userNS := "tamper-user"
	testenv.Env.EnsureNamespace(t, userNS)
	tests := map[string]struct {
		secretNS string // "" is the system namespace
		touch    bool
	}{
		"system namespace":          {},
		"system namespace, touched": {touch: true},
		"user namespace":            {secretNS: userNS},
		"user namespace, touched":   {secretNS: userNS, touch: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cosName := "tamper-" + strings.ReplaceAll(strings.ReplaceAll(name, ",", ""), " ", "-")
			secretNS := tc.secretNS
			if secretNS == "" {
				secretNS = testenv.SystemNamespace
			}
			secret := func(value string) *corev1.Secret {
				cm := builders.ConfigMap(userNS, cosName, map[string]string{"value": value})
				data, err := content.Canonical(cm.Object)
				if err != nil {
					t.Fatal(err)
				}
				// A plain key, as users write by hand: only the latched digest can notice a change.
				return &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Namespace: secretNS, Name: cosName + "-data",
						Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue(cosName)}},
					Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{"configmap": data},
				}
			}
			original := secret("value-before-c3a9")
			if err := c().Create(ctx, original); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { deleteSecret(t, client.ObjectKeyFromObject(original)) })
			cos := builders.COS(cosName, builders.WithPhase("configuration", builders.Ref(original.Name, tc.secretNS, "configmap")))
			create(t, cos)
			testenv.Env.RemoveAfter(t, cos.Name)
			testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)

			deleteSecret(t, client.ObjectKeyFromObject(original))
			if err := c().Create(ctx, secret("value-after-5e1f")); err != nil {
				t.Fatal(err)
			}
			if tc.touch {
				patch := []byte(`{"metadata":{"annotations":{"example.com/touched":"yes"}}}`)
				if err := c().Patch(ctx, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: cosName}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
					t.Fatal(err)
				}
			}
			got := testenv.Env.WaitForCondition(t, cosName, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonBlocked)
			msg := apimeta.FindStatusCondition(got.Status.Conditions, olmv1.ConditionProgressing).Message
			if !strings.Contains(msg, `"configuration"`) {
				t.Errorf("Blocked message %q does not name the phase", msg)
			}
			if strings.Contains(msg, "value-before-c3a9") || strings.Contains(msg, "value-after-5e1f") {
				t.Errorf("Blocked message %q echoes Secret content", msg)
			}
		})
	}
}

// deleteSecret deletes a Secret and waits until it is gone.
func deleteSecret(t *testing.T, key client.ObjectKey) {
	t.Helper()
	if err := c().Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "Secret "+key.String()+" to be gone", func(ctx context.Context) (bool, string) {
		err := c().Get(ctx, key, &corev1.Secret{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
