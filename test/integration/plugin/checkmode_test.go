package plugin_test

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestCheckKnowsTheMode: check reads the mode from what is installed and advises for that mode only.
// The in-process manager's webhooks, called by URL with the self-signed CA, read as self-signed;
// a webhook configuration called through a Service whose Deployment runs --webhook-cert-source=secret
// --rollout=false with cert-manager's annotation reads as webhook-only with cert-manager, and its
// missing Certificate fails; it warns that the webhook port accepts unauthenticated callers until
// the Deployment runs with --webhook-client-ca.
func TestCheckKnowsTheMode(t *testing.T) {
	r := plugin(t, "check")
	if r.err != nil {
		t.Fatalf("check: %v\n%s", r.err, r.stdout)
	}
	if !strings.Contains(r.stdout, "[ok]   Mode: self-signed: the manager keeps its CA") || strings.Contains(r.stdout, "cert-manager") {
		t.Errorf("check of the self-signed manager:\n%s", r.stdout)
	}

	const ns = "check-mode"
	testenv.Env.EnsureNamespace(t, ns)
	labels := map[string]string{"app": "check-mode-manager"}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cos-externalizer"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "manager", Image: "cos-externalizer:dev", Args: []string{"--leader-elect", "--webhook-cert-source=secret", "--rollout=false"}}}}}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cos-externalizer-webhook"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 443}}}}
	// It matches no object (a label nobody sets), and fails open.
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "check-mode", Annotations: map[string]string{"cert-manager.io/inject-ca-from": ns + "/serving-cert"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "check-mode.cos-externalizer.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: svc.Name, Path: ptr.To("/mutate")}},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"kubectl-cos-check-mode": "never-set"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	for _, o := range []client.Object{deploy, svc, cfg} {
		if err := c().Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c().Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		})
	}
	r = plugin(t, "check")
	for _, s := range []string{
		"[ok]   Mode: webhook-only (--rollout=false: another reconciler, OLM's operator-controller, rolls ClusterObjectSets out); cert-manager issues the serving certificate and its cainjector injects the CA of Certificate check-mode/serving-cert.",
		"[FAIL] Certificate check-mode/serving-cert is not found",
		"[FAIL] The CA bundle of webhook check-mode.cos-externalizer.io (MutatingWebhookConfiguration check-mode) is empty: cert-manager's CA injector has not injected the CA of Certificate check-mode/serving-cert.",
		"[warn] The webhook port (9443) of check-mode/cos-externalizer accepts unauthenticated callers",
	} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("check lacks %q:\n%s", s, r.stdout)
		}
	}
	if exitCode(r.err) != 1 || strings.Contains(r.stdout, "self-signed") {
		t.Errorf("check: %v\n%s", r.err, r.stdout)
	}

	// With caller authentication, as config/components/webhook-client-ca-kubeadm runs it.
	// Read again at each try: the Deployment's controller writes it meanwhile.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c().Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
			return err
		}
		deploy.Spec.Template.Spec.Containers[0].Args = append(deploy.Spec.Template.Spec.Containers[0].Args,
			"--webhook-client-ca=/etc/cos-externalizer/webhook-client-ca/ca.crt", "--webhook-client-names=front-proxy-client")
		return c().Update(ctx, deploy)
	}); err != nil {
		t.Fatal(err)
	}
	r = plugin(t, "check")
	want := "[ok]   The webhook port of check-mode/cos-externalizer serves only callers with a client certificate of --webhook-client-ca /etc/cos-externalizer/webhook-client-ca/ca.crt (front-proxy-client)."
	if !strings.Contains(r.stdout, want) || strings.Contains(r.stdout, "unauthenticated") {
		t.Errorf("check lacks %q:\n%s", want, r.stdout)
	}
}
