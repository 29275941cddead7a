package deploy_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// leaseName is the manager's leader election Lease (its LeaderElectionID).
const leaseName = "cos-externalizer.olm.operatorframework.io"

// TestManagerRunsWithTheOverlayRBAC runs the manager as the overlay's ServiceAccount, with the
// overlay's RBAC and nothing else, through what it does in a cluster: leader election, externalizing
// an inline ClusterObjectSet, owning its Secrets, rolling it out and tearing it down (default) or
// leaving that to OLM (webhook-only), and sweeping an orphaned Secret. A rule the least-privilege
// roles lack shows up as a Forbidden error and a timeout here.
func TestManagerRunsWithTheOverlayRBAC(t *testing.T) {
	for _, o := range overlays {
		if !o.install || o.name == "self-signed" { // self-signed has default's RBAC
			continue
		}
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			applySystemNamespace(t)
			applyRBAC(t, o.name)
			env := impersonating(t, "system:serviceaccount:"+systemNamespace+":"+serviceAccount)
			m, err := env.StartManager(ctx,
				"--leader-elect", "--externalize=always", fmt.Sprintf("--rollout=%t", o.rollout),
				"--orphan-sweep-interval=500ms", "--orphan-grace-period=3s")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := m.Stop(); err != nil {
					t.Error(err)
				}
				// The next manager need not wait for the stopped one's Lease to expire.
				lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: leaseName}}
				if err := testenv.Env.Client.Delete(ctx, lease); client.IgnoreNotFound(err) != nil {
					t.Error(err)
				}
				if err := testenv.Env.RemoveWebhooks(ctx); err != nil {
					t.Error(err)
				}
			})
			c := testenv.Env.Client

			framework.Eventually(ctx, t, "the manager to lead", func(ctx context.Context) (bool, string) {
				lease := &coordinationv1.Lease{}
				err := c.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: leaseName}, lease)
				return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "", fmt.Sprint(err)
			})

			// The event that records who leads (core events, in the system namespace).
			framework.Eventually(ctx, t, "the leader election event", func(ctx context.Context) (bool, string) {
				list := &corev1.EventList{}
				if err := c.List(ctx, list, client.InNamespace(systemNamespace)); err != nil {
					return false, err.Error()
				}
				return slices.ContainsFunc(list.Items, func(e corev1.Event) bool { return e.Reason == "LeaderElection" }), fmt.Sprintf("%d events", len(list.Items))
			})

			name := "rbac-" + o.name
			cos := builders.COS(name, builders.WithPhase("configuration", builders.InlineConfigMaps("default", name, 2)...))
			if err := c.Create(ctx, cos); err != nil {
				t.Fatalf("creating an inline ClusterObjectSet through the webhook: %v", err)
			}
			testenv.Env.RemoveAfter(t, name)
			var secrets []corev1.Secret
			framework.Eventually(ctx, t, "the object-data Secrets to be owned by the ClusterObjectSet", func(ctx context.Context) (bool, string) {
				stored := &olmv1.ClusterObjectSet{}
				if err := c.Get(ctx, client.ObjectKey{Name: name}, stored); err != nil {
					return false, err.Error()
				}
				list := &corev1.SecretList{}
				if err := c.List(ctx, list, client.InNamespace(systemNamespace),
					client.MatchingLabels{olmv1.LabelRevisionName: naming.RevisionLabelValue(name)}); err != nil {
					return false, err.Error()
				}
				secrets = list.Items
				for _, s := range secrets {
					if !slices.ContainsFunc(s.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == stored.UID }) {
						return false, "Secret " + s.Name + " not owned yet"
					}
				}
				return len(secrets) > 0, fmt.Sprintf("%d Secrets", len(secrets))
			})

			configMap := client.ObjectKey{Namespace: "default", Name: name + "-0"}
			if o.rollout {
				framework.Eventually(ctx, t, "the rollout to succeed", func(ctx context.Context) (bool, string) {
					stored := &olmv1.ClusterObjectSet{}
					if err := c.Get(ctx, client.ObjectKey{Name: name}, stored); err != nil {
						return false, err.Error()
					}
					cond := apimeta.FindStatusCondition(stored.Status.Conditions, olmv1.ConditionProgressing)
					return cond != nil && cond.Reason == olmv1.ReasonSucceeded, fmt.Sprintf("%+v", stored.Status.Conditions)
				})
				if err := c.Get(ctx, configMap, &corev1.ConfigMap{}); err != nil {
					t.Errorf("the rolled-out ConfigMap: %v", err)
				}
				framework.Eventually(ctx, t, "an event about the rollout (events.k8s.io)", func(ctx context.Context) (bool, string) {
					list := &eventsv1.EventList{}
					if err := c.List(ctx, list); err != nil {
						return false, err.Error()
					}
					return slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
						return e.Regarding.Kind == olmv1.ClusterObjectSetKind && e.Regarding.Name == name
					}), fmt.Sprintf("%d events", len(list.Items))
				})
			} else if err := c.Get(ctx, configMap, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				t.Errorf("webhook-only mode rolled the ConfigMap out (%v)", err)
			}

			// Teardown (default) patches the finalizer away after deleting the ConfigMaps.
			framework.Delete(ctx, t, c, cos)
			if o.rollout {
				if err := c.Get(ctx, configMap, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
					t.Errorf("the ConfigMap outlived its ClusterObjectSet's teardown (%v)", err)
				}
			}

			// The sweep deletes an object-data Secret that no ClusterObjectSet references.
			orphan := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: name + "-orphan",
					Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue(name + "-gone")}},
				Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{"k": []byte("{}")},
			}
			if err := c.Create(ctx, orphan); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), orphan) })
			framework.WaitGone(ctx, t, c, orphan) // by the sweep
		})
	}
}

// applyRBAC applies the ServiceAccount and RBAC objects of an overlay for real, and deletes them
// when the test ends.
func applyRBAC(t *testing.T, overlay string) {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, u := range parse(t, render(t, overlay)) {
		switch u.GetKind() {
		case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			objs = append(objs, u)
		}
	}
	for _, u := range objs {
		mustKubectl(t, mustJSON(t, u), "apply", "--server-side", "--field-manager="+fieldManager, "-f", "-")
	}
	t.Cleanup(func() {
		for _, u := range objs {
			if err := testenv.Env.Client.Delete(context.Background(), u); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		}
	})
}

// impersonating returns the test environment acting as user, a ServiceAccount. Besides its own
// roles, the user may install the webhook configurations and make sure the system namespace exists,
// as the installer does for a manager in a cluster (Environment.StartManager does it for the manager it
// starts); the manager itself never touches those.
func impersonating(t *testing.T, user string) *testenv.Environment {
	t.Helper()
	ctx := context.Background()
	installer := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "cos-externalizer-test-installer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, Verbs: []string{"get", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: installer.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: installer.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: systemNamespace, Name: serviceAccount}},
	}
	for _, obj := range []client.Object{installer, binding} {
		if err := testenv.Env.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := testenv.Env.Client.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		})
	}
	// The authorizer sees new bindings a moment later: wait until it grants what was just bound.
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"}
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "create", Resource: "namespaces"},
		{Verb: "create", Resource: "secrets", Namespace: systemNamespace},
		{Verb: "list", Group: olmv1.GroupVersion.Group, Resource: "clusterobjectsets"},
	} {
		framework.Eventually(ctx, t, fmt.Sprintf("%s to be allowed to %s %s", user, attrs.Verb, attrs.Resource), func(ctx context.Context) (bool, string) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups, ResourceAttributes: &attrs,
			}}
			if err := testenv.Env.Client.Create(ctx, review); err != nil {
				return false, err.Error()
			}
			return review.Status.Allowed, review.Status.Reason
		})
	}
	env := *testenv.Env
	cp := *env.ControlPlane
	cp.Config = rest.CopyConfig(cp.Config)
	cp.Config.Impersonate = rest.ImpersonationConfig{
		UserName: user,
		Groups:   groups,
	}
	env.ControlPlane = &cp
	return &env
}
