package webhook_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// TestSecretGuardOLMPatch: OLM's operator-controller, as its ServiceAccount, writes an object-data
// Secret (the same label as ours) and a ClusterObjectSet of refs to it, then sets the Secret's owner
// as it does: a JSON merge patch of the whole ownerReferences list, its ClusterObjectSet alone,
// computed from the Secret it created. The default guard admits it after our Secret ownership while
// that ClusterObjectSet is the only user, and refuses it once it drops another user's reference. With
// config/webhook-only's exemption (its flag and matchCondition, as rendered) the API server never
// calls the guard for OLM: the patch is admitted and our ownership adds the dropped reference back;
// and before ours, with no manager answering the fail-closed guard, OLM's patch still goes through.
func TestSecretGuardOLMPatch(t *testing.T) {
	ctx := context.Background()
	c := testenv.Env.Client
	olm, err := testenv.Env.As(webhook.OperatorControllerUser)
	if err != nil {
		t.Fatal(err)
	}
	// write creates, as OLM, a Secret of one object and a ClusterObjectSet that references it; it
	// returns the Secret as OLM holds it (no owners, no resourceVersion) and the stored set.
	write := func(t *testing.T, rev string) (*corev1.Secret, *olmv1.ClusterObjectSet) {
		t.Helper()
		data, err := content.Canonical(builders.ConfigMap("default", rev, map[string]string{"a": "b"}).Object)
		if err != nil {
			t.Fatal(err)
		}
		key := content.Key(data)
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: rev + "-0123456789abcdef",
				Labels: map[string]string{olmv1.LabelRevisionName: rev, "olm.operatorframework.io/owner-name": "olm-ext"}},
			Immutable: ptr.To(true), Type: olmv1.SecretTypeObjectData, Data: map[string][]byte{key: data},
		}
		if err := olm.Create(ctx, sec.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		testenv.Env.RemoveWithSecretsAfter(t, rev)
		cos := builders.COS(rev, builders.WithPhase("deploy", builders.Ref(sec.Name, testenv.SystemNamespace, key)))
		if err := olm.Create(ctx, cos); err != nil {
			t.Fatal(err)
		}
		return sec, cos
	}
	// olmPatch is operator-controller's patchOwnerRefsOnSecrets on the Secret it created.
	olmPatch := func(sec *corev1.Secret, cos *olmv1.ClusterObjectSet) error {
		s := sec.DeepCopy()
		patch := client.MergeFrom(s.DeepCopy())
		s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(),
			Kind: olmv1.ClusterObjectSetKind, Name: cos.Name, UID: cos.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)})
		return olm.Patch(ctx, s, patch)
	}
	owners := func(sec *corev1.Secret) []types.UID {
		live := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sec), live); err != nil {
			t.Fatal(err)
		}
		var uids []types.UID
		for _, r := range live.OwnerReferences {
			uids = append(uids, r.UID)
		}
		return uids
	}

	t.Log("the default guard: OLM's patch after our ownership")
	sec, cos := write(t, "olm-ext-1")
	settledSecrets(t, cos)
	if err := olmPatch(sec, cos); err != nil {
		t.Errorf("OLM's patch after our ownership, its ClusterObjectSet the only user: %v", err)
	}
	user := builders.COS("olm-ext-user", builders.WithPhase("deploy", builders.Ref(sec.Name, testenv.SystemNamespace, cos.Spec.Phases[0].Objects[0].Ref.Key)))
	if err := c.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	testenv.Env.RemoveAfter(t, user.Name)
	framework.Eventually(ctx, t, "our ownership to add the second user", func(context.Context) (bool, string) {
		got := owners(sec)
		return slices.Contains(got, user.UID) && slices.Contains(got, cos.UID), fmt.Sprint(got)
	})
	if err := olmPatch(sec, cos); err == nil || !strings.Contains(err.Error(), "cannot remove its owner reference to ClusterObjectSet olm-ext-user") {
		t.Fatalf("OLM's patch dropping another user's reference, not exempt: want the guard's refusal, got %v", err)
	}

	t.Log("config/webhook-only: OLM exempt")
	flagArg, expression := webhookOnlyExemption(t)
	// restore starts the package's manager again (and its generated webhook configuration), before
	// anything is removed: a Secret's delete waits on the guard.
	restore := withManager(t, flagArg)
	wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cos-externalizer"}, wc); err != nil {
		t.Fatal(err)
	}
	for i := range wc.Webhooks {
		for j := range wc.Webhooks[i].MatchConditions {
			if wc.Webhooks[i].Name == webhook.SecretGuardName && wc.Webhooks[i].MatchConditions[j].Name == webhook.ExemptConditionName {
				wc.Webhooks[i].MatchConditions[j].Expression = expression
			}
		}
	}
	if err := c.Update(ctx, wc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "OLM's patch to be admitted (the exemption in effect)", func(context.Context) (bool, string) {
		err := olmPatch(sec, cos)
		return err == nil, fmt.Sprint(err)
	})
	framework.Eventually(ctx, t, "our ownership to add the dropped user back", func(context.Context) (bool, string) {
		got := owners(sec)
		return slices.Contains(got, user.UID) && slices.Contains(got, cos.UID), fmt.Sprint(got)
	})

	t.Log("config/webhook-only: OLM's patch before ours, no manager answering")
	if err := manager.Stop(); err != nil {
		t.Fatal(err)
	}
	sec2, cos2 := write(t, "olm-ext-2")
	t.Cleanup(restore)
	if err := olmPatch(sec2, cos2); err != nil {
		t.Errorf("OLM's patch with no manager answering, exempt: %v", err)
	}
	if got := owners(sec2); !slices.Equal(got, []types.UID{cos2.UID}) {
		t.Errorf("owners %v, want OLM's ClusterObjectSet %s", got, cos2.UID)
	}
	// The guard is in effect for everyone else: it fails closed.
	live := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sec2), live); err != nil {
		t.Fatal(err)
	}
	live.Labels[olmv1.LabelRevisionName] = "someone-else"
	if err := asAlice(t).Update(ctx, live); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("alice changing the label with no manager answering: want the guard failing closed, got %v", err)
	}
	restore()
}

// webhookOnlyExemption returns config/webhook-only's --secret-guard-exempt-users argument and its
// secret guard's exemption matchCondition, as rendered.
func webhookOnlyExemption(t *testing.T) (flagArg, expression string) {
	t.Helper()
	objs, err := manifests.Parse(testenv.Kustomize(t, "webhook-only"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				t.Fatal(err)
			}
			for _, a := range d.Spec.Template.Spec.Containers[0].Args {
				if strings.HasPrefix(a, "--secret-guard-exempt-users=") {
					flagArg = a
				}
			}
		case "ValidatingWebhookConfiguration":
			wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, wc); err != nil {
				t.Fatal(err)
			}
			for _, w := range wc.Webhooks {
				for _, mc := range w.MatchConditions {
					if w.Name == webhook.SecretGuardName && mc.Name == webhook.ExemptConditionName {
						expression = mc.Expression
					}
				}
			}
		}
	}
	if !strings.Contains(flagArg, webhook.OperatorControllerUser) || !strings.Contains(expression, webhook.OperatorControllerUser) {
		t.Fatalf("config/webhook-only does not exempt %s: flag %q, matchCondition %q", webhook.OperatorControllerUser, flagArg, expression)
	}
	return flagArg, expression
}
