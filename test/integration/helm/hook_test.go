package helm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/e2e/local"
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
			// Deleted whether the hook succeeds or fails (Helm 3.18 and later delete the objects of
			// the hooks before a failed one by their hook-succeeded).
			if a["helm.sh/hook"] != "pre-delete" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded,hook-failed" {
				t.Errorf("%s: %s %s: hook annotations %v", overlay, u.GetKind(), u.GetName(), a)
			}
			if weight := a["helm.sh/hook-weight"]; (u.GetKind() == "Job") != (weight == "0") {
				t.Errorf("%s: %s %s has hook weight %q: the RBAC must come before the Job", overlay, u.GetKind(), u.GetName(), weight)
			}
		}
	}

	// The RBAC and the policy, applied for real (helm install does not create pre-delete hooks).
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
		// get: the webhook configurations name the install's namespace, which the hook checks.
		{"get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "cos-externalizer"},
		{"get", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "cos-externalizer"},
		{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "cos-externalizer"},
		{"delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "cos-externalizer"},
		{"get", "apps", "deployments", ns, "cos-externalizer"},
		{"delete", "apps", "deployments", ns, "cos-externalizer"},
		{"list", "", "pods", ns, ""},
		{"watch", "", "pods", ns, ""},
		{"get", "olm.operatorframework.io", "clusterobjectsets", "", "any"},
		{"list", "olm.operatorframework.io", "clusterobjectsets", "", ""},
		{"patch", "olm.operatorframework.io", "clusterobjectsets", "", "any"},
		// delete: a ClusterObjectSet already being deleted is switched to orphan deletion before
		// its finalizer is released, so that the garbage collector keeps what it installed. RBAC
		// allows it on any; the hook's ValidatingAdmissionPolicy only on those being deleted
		// (checkHookPolicy).
		{"delete", "olm.operatorframework.io", "clusterobjectsets", "", "any"},
	}
	denied := []access{
		{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "other"},
		{"delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "other"},
		{"list", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", ""},
		{"get", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "other"},
		// Deployments of other namespaces: the hook does not look for other installs' managers.
		{"list", "apps", "deployments", "", ""},
		{"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "cos-externalizer"},
		{"delete", "apps", "deployments", ns, "other"},
		{"update", "apps", "deployments", ns, "cos-externalizer"},
		{"get", "apps", "deployments", "default", "cos-externalizer"},
		{"delete", "", "pods", ns, "any"},
		{"list", "", "pods", "default", ""},
		{"get", "", "secrets", ns, "any"},
		{"list", "", "secrets", "", ""},
		{"create", "olm.operatorframework.io", "clusterobjectsets", "", ""},
		{"update", "olm.operatorframework.io", "clusterobjectsets", "", "any"},
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

	checkHookPolicy(ctx, t, ns)

	// The Job's own command line, as the hook's ServiceAccount, as a dry run (every write a
	// server-side dry run, authorized as the write would be) against a Deployment of that name: the
	// RBAC is enough for what the subcommand does, not only for what the list above names.
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cos-externalizer"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "hook-test"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "hook-test"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}},
		}}
	if err := testenv.Env.Client.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	framework.RemoveAfter(t, testenv.Env.Client, deploy)
	bin, err := local.BuildManager(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := find(helmTemplateIn(t, ns), "Job", hookName)
	var args []string
	for _, a := range at(job.Object, []string{"spec", "template", "spec", "containers", "0", "args"}).([]any) {
		args = append(args, a.(string))
	}
	cmd := exec.CommandContext(ctx, bin, append(args, "--dry-run")...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+serviceAccountKubeconfig(ctx, t, ns, hookName))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s as the hook's ServiceAccount: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	if err := testenv.Env.Client.Get(ctx, client.ObjectKeyFromObject(deploy), &appsv1.Deployment{}); err != nil {
		t.Errorf("after the dry run, the Deployment: %v", err)
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

// checkHookPolicy: the hook's ValidatingAdmissionPolicy (applied with its RBAC, in namespace ns)
// lets its ServiceAccount delete only ClusterObjectSets already being deleted, and patch them only to
// remove finalizers; other users are not concerned. Every request is a server-side dry run, which
// admission sees as the write itself.
func checkHookPolicy(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	const finalizer = "test.cos-externalizer.io/keep"
	live := builders.COS("hook-policy-live", builders.WithPhase("configuration", builders.InlineConfigMaps("default", "hook-policy-live", 1)...))
	live.Finalizers = []string{finalizer}
	deleting := builders.COS("hook-policy-deleting", builders.WithPhase("configuration", builders.InlineConfigMaps("default", "hook-policy-deleting", 1)...))
	deleting.Finalizers = []string{finalizer}
	for _, c := range []*olmv1.ClusterObjectSet{live, deleting} {
		if err := testenv.Env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx := context.Background()
			_ = testenv.Env.Client.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			_ = testenv.Env.Client.Delete(ctx, c)
		})
	}
	if err := testenv.Env.Client.Delete(ctx, deleting); err != nil {
		t.Fatal(err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", serviceAccountKubeconfig(ctx, t, ns, hookName))
	if err != nil {
		t.Fatal(err)
	}
	hook, err := client.New(cfg, client.Options{Scheme: testenv.Env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	dryRun := client.DryRunAll
	patch := func(c *olmv1.ClusterObjectSet, p string) func(context.Context) error {
		return func(ctx context.Context) error {
			return hook.Patch(ctx, c.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(p)), dryRun)
		}
	}
	for name, tc := range map[string]struct {
		do      func(context.Context) error
		allowed bool
	}{
		"delete a live one": {do: func(ctx context.Context) error { return hook.Delete(ctx, live.DeepCopy(), dryRun) }},
		"delete one being deleted, orphaning": {do: func(ctx context.Context) error {
			return hook.Delete(ctx, deleting.DeepCopy(), dryRun, client.PropagationPolicy(metav1.DeletePropagationOrphan))
		}, allowed: true},
		"remove a finalizer":                      {do: patch(live, `{"metadata":{"finalizers":[]}}`), allowed: true},
		"add a finalizer":                         {do: patch(live, `{"metadata":{"finalizers":["`+finalizer+`","other.example/f"]}}`)},
		"add a label":                             {do: patch(live, `{"metadata":{"labels":{"a":"b"}}}`)},
		"add an annotation":                       {do: patch(live, `{"metadata":{"annotations":{"a":"b"}}}`)},
		"change the spec":                         {do: patch(live, `{"spec":{"lifecycleState":"Archived"}}`)},
		"add an owner":                            {do: patch(live, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"00000000-0000-0000-0000-000000000001"}]}}`)},
		"remove a finalizer of one being deleted": {do: patch(deleting, `{"metadata":{"finalizers":[]}}`), allowed: true},
	} {
		framework.Eventually(ctx, t, fmt.Sprintf("the hook's ServiceAccount: %s, allowed %v", name, tc.allowed), func(ctx context.Context) (bool, string) {
			err := tc.do(ctx)
			switch {
			case tc.allowed:
				return err == nil, fmt.Sprint(err)
			case err == nil:
				return false, "allowed"
			default:
				// Refused by the policy (not RBAC, which allows every one of these).
				return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"), err.Error()
			}
		})
	}
	// Anyone else deletes as RBAC allows.
	if err := testenv.Env.Client.Delete(ctx, live.DeepCopy(), dryRun); err != nil {
		t.Errorf("an administrator's dry-run delete: %v", err)
	}
}
