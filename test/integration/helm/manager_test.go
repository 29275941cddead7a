package helm_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/e2e/local"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// crdName is the ClusterObjectSet CRD's name.
const crdName = "clusterobjectsets.olm.operatorframework.io"

var managerRuns int

// TestManagerFromChart installs the chart with docs/install.md's line (the local chart, mode
// self-signed: no cert-manager here) into cos-system on a cluster without the CRD, then runs the
// real manager binary as a process with exactly the rendered Deployment's args and env, as the
// chart's ServiceAccount (a TokenRequest token), with the local changes a process on loopback needs
// after them (--kubeconfig, listen addresses, the certificate's host 127.0.0.1; the webhook
// configurations call it by URL). It must lead in cos-system, keep its CA there, serve, and a
// ClusterObjectSet must round-trip through its webhooks into Secrets in cos-system and be rolled
// out from them. It does so as the chart installs by default and with fullnameOverride, with
// which the manager must find its renamed objects by the flags the chart renders.
func TestManagerFromChart(t *testing.T) {
	managerRuns++
	// Subtests in order: each uninstalls its release before the next installs.
	for _, tc := range []struct {
		name, fullname string
		set            []string
	}{
		{"default", release, nil},
		{"fullnameOverride", "acme", []string{"fullnameOverride=acme"}},
	} {
		t.Run(tc.name, func(t *testing.T) { runManagerFromChart(t, tc.name, tc.fullname, tc.set) })
	}
}

// runManagerFromChart is TestManagerFromChart with the values set, which name the objects fullname.
func runManagerFromChart(t *testing.T, subtest, fullname string, set []string) {
	ctx := context.Background()
	c := testenv.Env.Client
	const ns = "cos-system"

	// A cluster as docs/install.md's line meets it: no CRD (testenv installed one, earlier runs
	// kept the chart's).
	framework.Delete(ctx, t, c, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}})
	env := []string{"KUBECONFIG=" + testenv.Env.Kubeconfig}
	install := []string{"install", release, chartDir(t), "--namespace", ns, "--create-namespace", "--set", "mode=self-signed"}
	for _, s := range set {
		install = append(install, "--set", s)
	}
	if out, err := helmEnv(t, env, install...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The hook's Job needs a kubelet; the manager is stopped by now and its ClusterObjectSet gone.
		if out, err := helmEnv(t, env, "uninstall", release, "-n", ns, "--wait", "--no-hooks"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})
	manifest, err := helmEnv(t, env, "get", "manifest", release, "-n", ns)
	if err != nil {
		t.Fatalf("helm get manifest: %v\n%s", err, manifest)
	}
	args, environ := renderedManager(t, []byte(manifest), fullname)
	framework.Eventually(ctx, t, "the chart's CRD established", func(ctx context.Context) (bool, string) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
			return false, err.Error()
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %v", crd.Status.Conditions)
	})

	ports, err := controlplane.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	webhook, probe, metrics := ports[0], ports[1], ports[2]
	pointWebhooksAt(ctx, t, "https://127.0.0.1:"+strconv.Itoa(webhook), fullname)
	bin, err := local.BuildManager(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range environ {
		name, value, _ := strings.Cut(e, "=")
		t.Setenv(name, value) // the process inherits them
	}
	kubeconfig := serviceAccountKubeconfig(ctx, t, ns, fullname)
	// --rollout=auto (the default) reads OLM's Deployments in OLM's namespace, wherever the chart
	// is: the chart's RBAC must let it (a Forbidden read is an observation it cannot decide on).
	saConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if obs, err := app.ObserveOLM(ctx, saConfig); err != nil || len(obs.Unreadable) > 0 {
		t.Errorf("--rollout=auto's reads as %s/%s: unreadable %v, error %v", ns, fullname, obs.Unreadable, err)
	}
	args = append(args, "--kubeconfig="+kubeconfig,
		"--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(webhook), "--webhook-cert-hosts=127.0.0.1",
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probe), "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metrics))
	logPath := filepath.Join(t.TempDir(), "manager.log")
	proc, err := controlplane.StartProcess("manager", bin, args, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := proc.Stop(30 * time.Second); err != nil {
			t.Errorf("stopping the manager: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("the manager's log:\n%s", b)
		}
	})

	framework.Eventually(ctx, t, "the manager ready", func(ctx context.Context) (bool, string) {
		if err := proc.ExitError(); err != nil {
			return false, "exited: " + err.Error()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(probe)+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	framework.Eventually(ctx, t, "a Lease in "+ns+" held", func(ctx context.Context) (bool, string) {
		leases := &coordinationv1.LeaseList{}
		if err := c.List(ctx, leases, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Leases, none held", len(leases.Items))
	})
	// The CA Secret the chart names (its ServiceMonitor reads it), not the manager's default.
	caSecret := fullname + strings.TrimPrefix(certs.DefaultCASecret, release)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: caSecret}, &corev1.Secret{}); err != nil {
		t.Errorf("the self-signed CA %s in %s: %v", caSecret, ns, err)
	}

	// A ClusterObjectSet through the webhooks: its objects go into Secrets in cos-system, from which
	// the reconciler rolls it out.
	name := fmt.Sprintf("chart-manager-%s-%d", strings.ToLower(subtest), managerRuns)
	cos := builders.COS(name, builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		builders.WithPhase("config", builders.Inline(builders.ConfigMap("default", name, map[string]string{"from": "chart"}))))
	if err := c.Create(ctx, cos); err != nil {
		t.Fatalf("creating ClusterObjectSet %s: %v", name, err)
	}
	framework.RemoveAfter(t, c, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}})
	stored := &olmv1.ClusterObjectSet{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, stored); err != nil {
		t.Fatal(err)
	}
	for _, p := range stored.Spec.Phases {
		for _, o := range p.Objects {
			if o.Ref.Name == "" || o.Ref.Namespace != "" && o.Ref.Namespace != ns {
				t.Errorf("phase %s holds %+v, want a ref into the system namespace %s", p.Name, o, ns)
			}
		}
	}
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{olmv1.LabelRevisionName: naming.RevisionLabelValue(name)}); err != nil || len(secrets.Items) == 0 {
		t.Errorf("the object-data Secrets of %s in %s: %d, %v", name, ns, len(secrets.Items), err)
	}
	framework.Eventually(ctx, t, "the ConfigMap rolled out from "+ns, func(ctx context.Context) (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cm); err != nil {
			return false, err.Error()
		}
		return cm.Data["from"] == "chart", fmt.Sprintf("data %v", cm.Data)
	})
}

// renderedManager returns the manager container's args and environment (NAME=value, a
// resourceFieldRef resolved as the kubelet would) of the Deployment name in a release's manifest.
func renderedManager(t *testing.T, manifest []byte, name string) (args, environ []string) {
	t.Helper()
	objs, err := manifests.Parse(manifest)
	if err != nil {
		t.Fatal(err)
	}
	u := find(objs, "Deployment", name)
	if u == nil {
		t.Fatalf("no Deployment %s in the release", name)
	}
	deploy := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, deploy); err != nil {
		t.Fatal(err)
	}
	for _, ct := range deploy.Spec.Template.Spec.Containers {
		if ct.Name != "manager" {
			continue
		}
		for _, e := range ct.Env {
			switch {
			case e.ValueFrom == nil:
				environ = append(environ, e.Name+"="+e.Value)
			case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
				limit := ct.Resources.Limits[corev1.ResourceMemory]
				environ = append(environ, e.Name+"="+strconv.FormatInt(limit.Value(), 10))
			default:
				t.Fatalf("the manager's env %s: a source this test cannot resolve", e.Name)
			}
		}
		return ct.Args, environ
	}
	t.Fatal("no container manager")
	return nil, nil
}

// pointWebhooksAt has the chart's webhook configurations (named name) call url (and each webhook's
// path) instead of the Service, which no kube-proxy routes to a process here.
func pointWebhooksAt(ctx context.Context, t *testing.T, url, name string) {
	t.Helper()
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("admissionregistration.k8s.io/v1")
		u.SetKind(kind)
		if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			t.Fatal(err)
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for _, h := range hooks {
			cc := h.(map[string]any)["clientConfig"].(map[string]any)
			path, _, _ := unstructured.NestedString(cc, "service", "path")
			delete(cc, "service")
			cc["url"] = url + path
		}
		if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
			t.Fatal(err)
		}
		if err := testenv.Env.Client.Update(ctx, u); err != nil {
			t.Fatalf("pointing %s at %s: %v", kind, url, err)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the ServiceAccount with a
// token from the TokenRequest API.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	tr, err := testenv.Env.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.Env.Config
	cluster := &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: {Token: tr.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: "local", AuthInfo: name}},
		CurrentContext: name,
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
