package deploy_test

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// webhookOnlyExemption is the flag by which config/webhook-only exempts OLM's operator-controller from
// the Secret guard, beside the namespace controller.
var webhookOnlyExemption = "--secret-guard-exempt-users=" + webhook.NamespaceControllerUser + "," + webhook.OperatorControllerUser

// TestOverlaysSecretGuardExemption: each install overlay's secret guard exempts in its matchCondition
// exactly the users its manager's --secret-guard-exempt-users names (the manager checks the same at
// start); webhook-only adds OLM's operator-controller, the others exempt only the namespace
// controller.
func TestOverlaysSecretGuardExemption(t *testing.T) {
	forEachInstall(t, func(t *testing.T, o overlay, objs []*unstructured.Unstructured) {
		deploy := &appsv1.Deployment{}
		convert(t, find(objs, "Deployment", deploymentName), deploy)
		users := []string{webhook.NamespaceControllerUser} // the flag's default
		for _, a := range deploy.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--secret-guard-exempt-users="); ok {
				users = strings.Split(v, ",")
			}
		}
		wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		convert(t, find(objs, "ValidatingWebhookConfiguration", "cos-externalizer"), wc)
		var got string
		for _, w := range wc.Webhooks {
			for _, mc := range w.MatchConditions {
				if w.Name == webhook.SecretGuardName && mc.Name == webhook.ExemptConditionName {
					got = mc.Expression
				}
			}
		}
		if want := webhook.ExemptCondition(users); got != want {
			t.Errorf("the secret guard's matchCondition %q, want %q (--secret-guard-exempt-users)", got, want)
		}
		if olm := slices.Contains(users, webhook.OperatorControllerUser); olm != (o.name == "webhook-only") {
			t.Errorf("exempts OLM's operator-controller: %t, want %t (users %v)", olm, o.name == "webhook-only", users)
		}
	})
}
