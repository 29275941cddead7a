package helm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// hookName names the uninstall hook's Job, ServiceAccount, roles and bindings.
const hookName = "cos-externalizer-uninstall"

// TestUninstallHook: the chart's pre-delete hook runs the manager's uninstall subcommand on the
// release's namespace, Deployment and webhook configurations, in every mode, as hook resources;
// its RBAC, applied to the API server, allows exactly what the subcommand does (SubjectAccessReview)
// and nothing next to it. The Job itself needs a kubelet to run.
func TestUninstallHook(t *testing.T) {
	ctx := context.Background()
	const ns = "hook-test"
	for overlay, m := range modes {
		objs := helmTemplateIn(t, ns, m.set...)
		job := find(objs, "Job", hookName)
		if job == nil {
			t.Fatalf("%s: no Job %s", overlay, hookName)
		}
		want := []any{"uninstall", "--namespace=" + ns, "--deployment=cos-externalizer",
			"--mutating-webhook=cos-externalizer", "--validating-webhook=cos-externalizer"}
		if diff := cmp.Diff(want, at(job.Object, []string{"spec", "template", "spec", "containers", "0", "args"})); diff != "" {
			t.Errorf("%s: the hook's args (-want +got):\n%s", overlay, diff)
		}
		if got := at(job.Object, []string{"spec", "template", "spec", "containers", "0", "image"}); got != at(find(objs, "Deployment", "cos-externalizer").Object, []string{"spec", "template", "spec", "containers", "0", "image"}) {
			t.Errorf("%s: the hook's image %v is not the manager's", overlay, got)
		}
		for _, u := range hookObjects(objs) {
			a := u.GetAnnotations()
			if a["helm.sh/hook"] != "pre-delete" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
				t.Errorf("%s: %s %s: hook annotations %v", overlay, u.GetKind(), u.GetName(), a)
			}
			if weight := a["helm.sh/hook-weight"]; (u.GetKind() == "Job") != (weight == "0") {
				t.Errorf("%s: %s %s has hook weight %q: the RBAC must come before the Job", overlay, u.GetKind(), u.GetName(), weight)
			}
		}
	}

	// The RBAC, applied for real (helm install does not create pre-delete hooks).
	testenv.Env.EnsureNamespace(t, ns)
	var applied []client.Object
	for _, u := range hookObjects(helmTemplateIn(t, ns)) {
		if u.GetKind() == "Job" {
			continue
		}
		b, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		testenv.MustKubectl(t, b, "apply", "--server-side", "--field-manager="+fieldManager, "-f", "-")
		applied = append(applied, u)
	}
	framework.RemoveAfter(t, testenv.Env.Client, applied...)

	user := "system:serviceaccount:" + ns + ":" + hookName
	type access struct{ verb, group, resource, namespace, name string }
	allowed := []access{
		{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "cos-externalizer"},
		{"delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "cos-externalizer"},
		{"get", "apps", "deployments", ns, "cos-externalizer"},
		{"delete", "apps", "deployments", ns, "cos-externalizer"},
		{"list", "", "pods", ns, ""},
		{"watch", "", "pods", ns, ""},
		{"get", "olm.operatorframework.io", "clusterobjectsets", "", "any"},
		{"list", "olm.operatorframework.io", "clusterobjectsets", "", ""},
		{"patch", "olm.operatorframework.io", "clusterobjectsets", "", "any"},
		{"update", "olm.operatorframework.io", "clusterobjectsets", "", "any"},
	}
	denied := []access{
		{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "other"},
		{"delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "other"},
		{"list", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", ""},
		{"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "cos-externalizer"},
		{"delete", "apps", "deployments", ns, "other"},
		{"update", "apps", "deployments", ns, "cos-externalizer"},
		{"get", "apps", "deployments", "default", "cos-externalizer"},
		{"delete", "", "pods", ns, "any"},
		{"list", "", "pods", "default", ""},
		{"get", "", "secrets", ns, "any"},
		{"list", "", "secrets", "", ""},
		{"create", "olm.operatorframework.io", "clusterobjectsets", "", ""},
		{"delete", "olm.operatorframework.io", "clusterobjectsets", "", "any"},
		{"update", "olm.operatorframework.io", "clusterobjectsets/status", "", "any"},
	}
	check := func(a access, want bool) {
		resource, sub, _ := strings.Cut(a.resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: resource,
				Subresource: sub, Namespace: a.namespace, Name: a.name},
		}}
		what := fmt.Sprintf("%s %s %s/%s", a.verb, a.resource, a.namespace, a.name)
		framework.Eventually(ctx, t, fmt.Sprintf("the hook's ServiceAccount allowed %v to %s", want, what), func(ctx context.Context) (bool, string) {
			got, err := testenv.Env.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				return false, err.Error()
			}
			return got.Status.Allowed == want, fmt.Sprintf("allowed %v (%s)", got.Status.Allowed, got.Status.Reason)
		})
	}
	for _, a := range allowed {
		check(a, true)
	}
	for _, a := range denied {
		check(a, false)
	}
}

// hookObjects are the objects of a rendering that are Helm hooks.
func hookObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if _, ok := u.GetAnnotations()["helm.sh/hook"]; ok {
			out = append(out, u)
		}
	}
	return out
}
