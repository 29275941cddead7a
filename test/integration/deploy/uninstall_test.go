package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// pruneProtection is what keeps the CRD and the system namespace from Helm's uninstall, Argo CD's
// prune and Application deletion, and Flux's prune.
var pruneProtection = map[string]string{
	"helm.sh/resource-policy":           "keep",
	"argocd.argoproj.io/sync-options":   "Prune=false,Delete=false",
	"kustomize.toolkit.fluxcd.io/prune": "disabled",
}

// TestOverlaysProtectFromPrune: wherever an overlay holds the ClusterObjectSet CRD or the system
// namespace, they carry the keep and prune-protection annotations.
func TestOverlaysProtectFromPrune(t *testing.T) {
	forEachInstall(t, func(t *testing.T, _ overlay, objs []*unstructured.Unstructured) {
		for _, u := range []*unstructured.Unstructured{
			find(objs, "CustomResourceDefinition", "clusterobjectsets.olm.operatorframework.io"),
			find(objs, "Namespace", systemNamespace),
		} {
			if u == nil {
				continue
			}
			for k, v := range pruneProtection {
				if got := u.GetAnnotations()[k]; got != v {
					t.Errorf("%s %s: annotation %s %q, want %q", u.GetKind(), u.GetName(), k, got, v)
				}
			}
		}
	})
}

// olmManager is the field manager of OLM's operator-controller, which adds a finalizer of the same
// name as ours.
const olmManager = "operator-controller"

// TestUninstallKeepsWorkloads runs each way to uninstall (hack/uninstall.sh, as `make undeploy` does,
// which runs the Go uninstaller built from the checkout and then deletes the rest of the overlay; the
// manager's `cos-externalizer uninstall`, as the Helm chart's pre-delete hook does; `kubectl cos
// uninstall`) after the manager rolled ClusterObjectSets out and stopped (the break-glass case: our
// finalizers present, the fail-closed webhook configurations still installed, one ClusterObjectSet
// already being deleted and held by our finalizer), with the overlay's manager Deployment and RBAC
// applied. Every workload stays: the rolled-out objects, every ClusterObjectSet but the one being
// deleted (it goes, its objects orphaned), OLM's finalizer, the object-data Secrets, the CRD and the
// namespace; our finalizers, the webhook configurations and the Deployment go (and, with the script,
// the RBAC). The same with the webhook-only overlay (which holds neither CRD nor namespace); and with
// the system namespace being deleted as well: the uninstaller completes and says so. A dry run
// changes nothing; a second run does nothing (with the Go uninstall, the manager's subcommand runs,
// kubectl cos does the dry run and the second run).
func TestUninstallKeepsWorkloads(t *testing.T) {
	for name, tc := range map[string]struct {
		overlay     string
		terminating bool // the system namespace is being deleted
		run         uninstaller
		// again, if set, does the dry run and the second run instead of run.
		again *uninstaller
	}{
		"manager gone":                       {overlay: "self-signed", run: script},
		"webhook-only":                       {overlay: "webhook-only", run: script},
		"namespace being deleted":            {overlay: "default", terminating: true, run: script},
		"subcommand manager gone":            {overlay: "self-signed", run: managerUninstall, again: &pluginUninstall},
		"subcommand namespace being deleted": {overlay: "default", terminating: true, run: managerUninstall},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := testenv.Env.Client
			prefix := "uninstall-" + strings.ReplaceAll(name, " ", "-")
			again := tc.run
			if tc.again != nil {
				again = *tc.again
			}
			kept, deleted, olms := prefix+"-kept", prefix+"-deleted", prefix+"-olm"

			applySystemNamespace(t)
			m, err := testenv.Env.StartManager(ctx,
				"--externalize=always", "--rollout=true")
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			t.Cleanup(func() {
				if !stopped {
					_ = m.Stop()
				}
			})
			cleanupSets(t, kept, deleted, olms)
			// Runs first: cleanup must not meet fail-closed webhooks without a manager.
			t.Cleanup(func() {
				if err := testenv.Env.RemoveWebhooks(context.Background()); err != nil {
					t.Error(err)
				}
			})

			// Two ClusterObjectSets rolled out by our manager, which adds its finalizer.
			uids := map[string]string{}
			for _, n := range []string{kept, deleted} {
				if err := c.Create(ctx, builders.COS(n, builders.WithPhase("configuration", builders.InlineConfigMaps("default", n, 2)...))); err != nil {
					t.Fatal(err)
				}
				cos := testenv.Env.WaitForCondition(t, n, olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonSucceeded)
				testenv.Env.WaitOwned(t, n)
				if !controllerutil.ContainsFinalizer(cos, controllers.Finalizer) {
					t.Fatalf("%s has no finalizer after its rollout: %v", n, cos.Finalizers)
				}
				uids[n] = string(cos.UID)
			}
			secrets := map[string][]string{}
			for _, n := range []string{kept, deleted} {
				for _, s := range testenv.Env.ObjectDataSecrets(t, n) {
					secrets[n] = append(secrets[n], s.Name)
				}
			}

			// The manager goes; its fail-closed webhook configurations stay.
			if err := m.Stop(); err != nil {
				t.Fatal(err)
			}
			stopped = true

			// OLM's: the same finalizer name, added by another field manager.
			olm := builders.COS(olms)
			olm.Finalizers = []string{controllers.Finalizer}
			if err := c.Create(ctx, olm, client.FieldOwner(olmManager)); err != nil {
				t.Fatal(err)
			}
			// Deleted with nobody left to tear it down: our finalizer holds it.
			if err := c.Delete(ctx, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: deleted}}); err != nil {
				t.Fatal(err)
			}

			installed := applyManager(t, tc.overlay)
			if tc.terminating {
				holdNamespace(t)
			}

			if !tc.terminating {
				// A dry run changes nothing.
				mustUninstall(t, again, tc.overlay, "--dry-run")
				cos := &olmv1.ClusterObjectSet{}
				if err := c.Get(ctx, client.ObjectKey{Name: kept}, cos); err != nil || !controllerutil.ContainsFinalizer(cos, controllers.Finalizer) {
					t.Fatalf("after a dry run, %s: %v, finalizers %v", kept, err, cos.Finalizers)
				}
				for _, u := range installed {
					if err := c.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy()); err != nil {
						t.Fatalf("after a dry run, %s %s: %v", u.GetKind(), u.GetName(), err)
					}
				}
			}

			out := mustUninstall(t, tc.run, tc.overlay)
			for _, want := range []string{
				"clusterobjectset " + kept + ": released our finalizer",
				"clusterobjectset " + deleted + " is being deleted: its objects are kept",
				"clusterobjectset " + olms + " (" + olmManager + "): the finalizer is another controller's",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the uninstaller did not say %q", want)
				}
			}
			if tc.terminating && !strings.Contains(out, "namespace "+systemNamespace+" is being deleted") {
				t.Errorf("the uninstaller did not say the namespace is being deleted")
			}

			// The workloads: every rolled-out object, no longer owned by the deleted ClusterObjectSet.
			framework.WaitGone(ctx, t, c, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: deleted}})
			for _, n := range []string{kept, deleted} {
				for i := range 2 {
					cm := &corev1.ConfigMap{}
					if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("%s-%d", n, i)}, cm); err != nil {
						t.Errorf("the rolled-out ConfigMap of %s: %v", n, err)
						continue
					}
					if n == deleted && slices.ContainsFunc(cm.OwnerReferences, func(r metav1.OwnerReference) bool { return string(r.UID) == uids[n] }) {
						t.Errorf("ConfigMap %s is still owned by the deleted ClusterObjectSet", cm.Name)
					}
				}
			}
			// The ClusterObjectSets: ours without its finalizer, OLM's with it.
			for n, want := range map[string]bool{kept: false, olms: true} {
				cos := &olmv1.ClusterObjectSet{}
				if err := c.Get(ctx, client.ObjectKey{Name: n}, cos); err != nil {
					t.Errorf("ClusterObjectSet %s: %v", n, err)
				} else if got := controllerutil.ContainsFinalizer(cos, controllers.Finalizer); got != want {
					t.Errorf("ClusterObjectSet %s holds the finalizer: %t, want %t", n, got, want)
				}
			}
			// The object-data Secrets, but where the namespace is being deleted.
			if !tc.terminating {
				for n, want := range secrets {
					var got []string
					for _, s := range testenv.Env.ObjectDataSecrets(t, n) {
						got = append(got, s.Name)
					}
					if !slices.Equal(got, want) {
						t.Errorf("Secrets of %s: %q, want %q", n, got, want)
					}
				}
				ns := &corev1.Namespace{}
				if err := c.Get(ctx, client.ObjectKey{Name: systemNamespace}, ns); err != nil || ns.DeletionTimestamp != nil {
					t.Errorf("namespace %s: %v, deleting %v", systemNamespace, err, ns.DeletionTimestamp)
				}
			}
			if err := c.Get(ctx, client.ObjectKey{Name: "clusterobjectsets.olm.operatorframework.io"}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
				t.Errorf("the CRD: %v", err)
			}
			// What goes: the webhook configurations, the manager and, with the script, its RBAC.
			goes := append(ofKind(parse(t, render(t, tc.overlay)), "MutatingWebhookConfiguration"),
				ofKind(parse(t, render(t, tc.overlay)), "ValidatingWebhookConfiguration")...)
			if tc.run.script {
				goes = append(goes, installed...)
			} else {
				goes = append(goes, find(installed, "Deployment", deploymentName))
			}
			for _, u := range goes {
				framework.WaitGone(ctx, t, c, u)
			}

			if !tc.terminating {
				// Again: nothing more to do.
				if out := mustUninstall(t, again, tc.overlay); !strings.Contains(out, "done: 0 finalizers released") {
					t.Errorf("the second run did something:\n%s", out)
				}
				if !tc.run.script {
					return
				}
				// Tearing down needs --yes, and a running manager: without one, deleting the
				// ClusterObjectSets would hang on our finalizer (webhook-only leaves them to OLM).
				refusals := map[string]string{"--delete-workloads": "Add --yes"}
				if tc.overlay != "webhook-only" {
					refusals["--delete-workloads --yes"] = "is not running"
				}
				for args, want := range refusals {
					if out, err := uninstall(t, tc.overlay, strings.Fields(args)...); err == nil || !strings.Contains(out, want) {
						t.Errorf("hack/uninstall.sh %s: %v, want a refusal saying %q:\n%s", args, err, want, out)
					}
				}
				if err := c.Get(ctx, client.ObjectKey{Name: kept}, &olmv1.ClusterObjectSet{}); err != nil {
					t.Errorf("after the refusals, %s: %v", kept, err)
				}
			}
		})
	}
}

// managerKinds are the kinds of the overlay's objects applyManager applies.
var managerKinds = []string{"Deployment", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "Service", "PodDisruptionBudget"}

// applyManager applies the overlay's Deployment, RBAC, Services and PodDisruptionBudget for real
// (its pods run on kwok's node: nothing runs), waits for a pod, and returns them; extraKinds are
// applied too.
func applyManager(t *testing.T, overlay string, extraKinds ...string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, u := range parse(t, render(t, overlay)) {
		if slices.Contains(managerKinds, u.GetKind()) || slices.Contains(extraKinds, u.GetKind()) {
			objs = append(objs, u)
			mustKubectl(t, mustJSON(t, u), "apply", "--server-side", "--field-manager="+fieldManager, "-f", "-")
		}
	}
	t.Cleanup(func() {
		for _, u := range objs {
			if err := testenv.Env.Client.Delete(context.Background(), u); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		}
	})
	deploy := &appsv1.Deployment{}
	convert(t, find(objs, "Deployment", deploymentName), deploy)
	framework.Eventually(context.Background(), t, "a pod of the manager's Deployment", func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := testenv.Env.Client.List(ctx, pods, client.InNamespace(systemNamespace), client.MatchingLabels(deploy.Spec.Selector.MatchLabels)); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) > 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
	return objs
}

// holdNamespace deletes the system namespace and keeps it Terminating with a ConfigMap that holds a
// finalizer, released when the test ends; cleanup waits until the namespace is gone.
func holdNamespace(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := testenv.Env.Client
	hold := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "uninstall-hold",
		Finalizers: []string{"test.cos-externalizer.io/hold"}}}
	if err := c.Create(ctx, hold); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.Get(ctx, client.ObjectKeyFromObject(hold), hold); err == nil {
			hold.Finalizers = nil
			if err := c.Update(ctx, hold); err != nil {
				t.Error(err)
			}
		}
		framework.WaitGone(ctx, t, c, ns)
	})
	if err := c.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "namespace "+systemNamespace+" Terminating", func(ctx context.Context) (bool, string) {
		got := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(ns), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == corev1.NamespaceTerminating, string(got.Status.Phase)
	})
}

// cleanupSets deletes the ClusterObjectSets when the test ends, releasing any finalizer (no manager
// runs by then), the ConfigMaps they rolled out and their object-data Secrets (orphaned ones too),
// and waits until they are gone.
func cleanupSets(t *testing.T, names ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		c := testenv.Env.Client
		var gone []client.Object
		for _, n := range names {
			cos := &olmv1.ClusterObjectSet{}
			if err := c.Get(ctx, client.ObjectKey{Name: n}, cos); err == nil && len(cos.Finalizers) > 0 {
				cos.Finalizers = nil
				if err := c.Update(ctx, cos); err != nil {
					t.Error(err)
				}
			}
			gone = append(gone, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: n}})
			for _, s := range testenv.Env.ObjectDataSecrets(t, n) {
				gone = append(gone, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}})
			}
			for i := range 2 {
				gone = append(gone, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", n, i)}})
			}
		}
		for _, o := range gone {
			if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		}
		for _, o := range gone {
			framework.WaitGone(ctx, t, c, o)
		}
	})
}

// uninstaller is one way to uninstall: run it with the overlay and args, and get its output.
type uninstaller struct {
	name   string
	script bool // hack/uninstall.sh, which deletes the rest of the overlay too
	run    func(t *testing.T, overlay string, args ...string) (string, error)
}

var (
	// script is hack/uninstall.sh running this test binary as the manager's uninstall (asManager):
	// the same code, without a build of the manager each run (about 5 s of a core each).
	script = uninstaller{name: "hack/uninstall.sh", script: true, run: uninstall}
	// scriptBuilding is hack/uninstall.sh as users run it, building the manager from the checkout.
	scriptBuilding = uninstaller{name: "hack/uninstall.sh (building the manager)", script: true, run: func(t *testing.T, overlay string, args ...string) (string, error) {
		return runScript(t, []string{"COS_EXTERNALIZER="}, overlay, args...)
	}}
	// managerUninstall is the manager's subcommand, in the process.
	managerUninstall = uninstaller{name: "cos-externalizer uninstall", run: func(t *testing.T, _ string, args ...string) (string, error) {
		var out bytes.Buffer
		err := app.Uninstall(context.Background(), func() (*rest.Config, error) { return testenv.Env.Config, nil }, args, &out, &out)
		return out.String(), err
	}}
	// pluginUninstall is kubectl cos uninstall, in the process.
	pluginUninstall = uninstaller{name: "kubectl cos uninstall", run: func(t *testing.T, _ string, args ...string) (string, error) {
		var out bytes.Buffer
		cmd := commands.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
		cmd.SetArgs(append([]string{"--kubeconfig=" + testenv.Env.Kubeconfig, "uninstall"}, args...))
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}}
)

// mustUninstall runs u on the overlay with args and returns its output; it fails the test when u
// fails.
func mustUninstall(t *testing.T, u uninstaller, overlay string, args ...string) string {
	t.Helper()
	out, err := u.run(t, overlay, args...)
	t.Logf("%s %s:\n%s", u.name, strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("%s: %v", u.name, err)
	}
	return out
}

// runUninstall runs hack/uninstall.sh on the overlay (with args) and the control plane's kubectl, as
// `make undeploy` does, building the manager from the checkout, and returns its output; it fails the
// test when the script fails.
func runUninstall(t *testing.T, overlay string, args ...string) string {
	t.Helper()
	return mustUninstall(t, scriptBuilding, overlay, args...)
}

// asManager, set in the environment, makes this test binary the manager for its uninstall
// subcommand: hack/uninstall.sh runs it as COS_EXTERNALIZER.
const asManager = "COS_TEST_AS_COS_EXTERNALIZER"

func init() {
	if os.Getenv(asManager) == "" || len(os.Args) < 2 || os.Args[1] != app.UninstallCommand {
		return
	}
	os.Exit(app.UninstallMain(os.Args[2:]))
}

// uninstall runs hack/uninstall.sh with this test binary as the manager, and returns its output and
// error.
func uninstall(t *testing.T, overlay string, args ...string) (string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return runScript(t, []string{"COS_EXTERNALIZER=" + self, asManager + "=1"}, overlay, args...)
}

// runScript runs hack/uninstall.sh with env added to this process's, and returns its output and
// error.
func runScript(t *testing.T, env []string, overlay string, args ...string) (string, error) {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "hack", "uninstall.sh"), "-k", filepath.Join(root, "config", overlay)}, args...)...)
	cmd.Env = append(append(os.Environ(), "KUBECTL="+kubectl, "KUBECONFIG="+testenv.Env.Kubeconfig), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestUndeployAllTearsDown runs hack/uninstall.sh --delete-workloads --yes, as `make undeploy-all
// CONFIRM=yes` does, with a manager running (in this process; the overlay's Deployment is applied for
// its readiness): the ClusterObjectSet is torn down (its ConfigMaps go), then the CRD, the namespace
// and the rest of the overlay. The CRD is installed again afterwards for the other tests.
func TestUndeployAllTearsDown(t *testing.T) {
	ctx := context.Background()
	c := testenv.Env.Client
	const overlay, name = "self-signed", "undeploy-all"
	cleanupSets(t, name) // last, with the CRD back
	t.Cleanup(func() {
		dir, err := controlplane.CRDDir()
		if err == nil {
			_, err = controlplane.InstallCRDs(context.Background(), testenv.Env.Config, dir)
		}
		if err != nil {
			t.Error(err)
		}
	})
	applySystemNamespace(t)
	m, err := testenv.Env.StartManager(ctx,
		"--externalize=always", "--rollout=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
		if err := testenv.Env.RemoveWebhooks(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err := c.Create(ctx, builders.COS(name, builders.WithPhase("configuration", builders.InlineConfigMaps("default", name, 2)...))); err != nil {
		t.Fatal(err)
	}
	testenv.Env.WaitForCondition(t, name, olmv1.ConditionProgressing, metav1.ConditionTrue, olmv1.ReasonSucceeded)
	testenv.Env.WaitOwned(t, name)
	installed := applyManager(t, overlay)
	framework.Eventually(ctx, t, "the manager's Deployment ready", func(ctx context.Context) (bool, string) {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: deploymentName}, d); err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas > 0, fmt.Sprintf("%d ready", d.Status.ReadyReplicas)
	})

	out := runUninstall(t, overlay, "--delete-workloads", "--yes")
	if !strings.Contains(out, "the manager tears down everything they installed") {
		t.Errorf("the script did not say it tears down")
	}
	gone := []client.Object{
		&olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "clusterobjectsets.olm.operatorframework.io"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}},
	}
	for i := range 2 {
		gone = append(gone, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", name, i)}})
	}
	for _, u := range installed {
		gone = append(gone, u)
	}
	for _, o := range gone {
		framework.WaitGone(ctx, t, c, o)
	}
}

// TestUninstallFindsTheInstall: an install in another namespace than olmv1-system (the README's Helm
// line installs into cos-system): its manager's Deployment there and the webhook configurations
// calling its Service there. Each uninstaller pointed at olmv1-system (hack/uninstall.sh with
// config/default's manifests, the manager's --namespace, kubectl cos uninstall -n) refuses and
// changes nothing, naming the install's namespace. With a manager of another install running in
// olmv1-system, kubectl cos uninstall refuses too, and says how to scale it down; scaled to 0, it is
// left alone, and uninstall without -n finds the install by its webhook configurations and removes
// them and its manager. Run again with no manager anywhere, it says so (never "gone" for a manager
// that runs elsewhere).
func TestUninstallFindsTheInstall(t *testing.T) {
	const ns = "uninstall-elsewhere"
	ctx := context.Background()
	c := testenv.Env.Client
	testenv.Env.EnsureNamespace(t, ns)
	applySystemNamespace(t)
	objs := parse(t, render(t, "default"))
	deploy := find(objs, "Deployment", deploymentName).DeepCopy()
	deploy.SetNamespace(ns)
	install := []client.Object{deploy}
	for _, u := range append(ofKind(objs, "MutatingWebhookConfiguration"), ofKind(objs, "ValidatingWebhookConfiguration")...) {
		u = u.DeepCopy()
		webhooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for _, w := range webhooks {
			w := w.(map[string]any)
			if err := unstructured.SetNestedField(w, ns, "clientConfig", "service", "namespace"); err != nil {
				t.Fatal(err)
			}
			// Nothing serves them: let the API server go on without them meanwhile.
			w["failurePolicy"] = "Ignore"
		}
		if err := unstructured.SetNestedSlice(u.Object, webhooks, "webhooks"); err != nil {
			t.Fatal(err)
		}
		install = append(install, u)
	}
	for _, o := range install {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	framework.RemoveAfter(t, c, install...)
	stillThere := func(what string) {
		t.Helper()
		for _, o := range install {
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)); err != nil {
				t.Errorf("after %s: %v", what, err)
			}
		}
	}

	for _, tc := range []struct {
		u    uninstaller
		args []string
		want string
	}{
		{script, nil, "the webhook configurations call Service " + ns + "/cos-externalizer-webhook"},
		{managerUninstall, []string{"--namespace=" + systemNamespace}, "Run it again with --namespace=" + ns},
		{pluginUninstall, []string{"-n", systemNamespace}, "Run it again with --namespace=" + ns + " (kubectl cos uninstall -n " + ns + ")"},
	} {
		out, err := tc.u.run(t, "default", tc.args...)
		t.Logf("%s %v: %v\n%s", tc.u.name, tc.args, err, out)
		if err == nil || !strings.Contains(out+err.Error(), tc.want) {
			t.Errorf("%s %v: %v, want a refusal saying %q:\n%s", tc.u.name, tc.args, err, tc.want, out)
		}
		stillThere(tc.u.name)
	}

	// Another install's manager runs: the finalizers would come back.
	installed := applyManager(t, "default")
	other := find(installed, "Deployment", deploymentName)
	out, err := pluginUninstall.run(t, "default")
	if want := "Scale it to 0 first (kubectl -n " + systemNamespace + " scale deployment " + deploymentName + " --replicas=0)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("kubectl cos uninstall with another manager running: %v, want a refusal saying %q:\n%s", err, want, out)
	}
	stillThere("the refusal")
	mustKubectl(t, nil, "-n", systemNamespace, "scale", "deployment", deploymentName, "--replicas=0")

	out = mustUninstall(t, pluginUninstall, "default")
	for _, want := range []string{
		"uninstalling the install in namespace " + ns + " (the webhook configurations call Service " + ns + "/cos-externalizer-webhook)",
		"deployment " + systemNamespace + "/" + deploymentName + " is scaled to 0: not touched",
		"deployment " + ns + "/" + deploymentName + " deleted",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl cos uninstall did not say %q", want)
		}
	}
	for _, o := range install {
		framework.WaitGone(ctx, t, c, o)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), other.DeepCopy()); err != nil {
		t.Errorf("the other install's Deployment: %v", err)
	}

	framework.Delete(ctx, t, c, other.DeepCopy())
	out = mustUninstall(t, pluginUninstall, "default")
	for _, want := range []string{
		"deployment " + systemNamespace + "/" + deploymentName + ": not there, and no manager runs in any namespace",
		"done: 0 finalizers released",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl cos uninstall with nothing left did not say %q", want)
		}
	}
}
