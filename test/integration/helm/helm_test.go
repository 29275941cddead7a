// Package helm_test checks the Helm chart charts/cos-externalizer (generated from config/ by
// hack/gen/helmgen): with default values each mode renders what its overlay renders, apart from the
// labels Helm's charts add; the rendering passes a server-side dry run on a real API server and
// `helm lint`; values land where they should.
package helm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

func TestMain(m *testing.M) {
	testenv.Run(m)
}

const (
	namespace    = olmv1.DefaultSystemNamespace
	release      = "cos-externalizer"
	fieldManager = "cos-externalizer-deploy"
)

// modes are the chart's modes by the overlay each reproduces, with the --set values that make it
// (config/production is cert-manager with three replicas).
var modes = map[string]struct {
	set            []string
	certManager    bool
	serviceMonitor bool
}{
	"default":      {set: []string{"mode=cert-manager"}, certManager: true},
	"self-signed":  {set: []string{"mode=self-signed"}},
	"webhook-only": {set: []string{"mode=webhook-only"}, certManager: true},
	"production":   {set: []string{"mode=cert-manager", "replicas=3"}, certManager: true},
}

// overlayValues are the values that make the chart render what the overlays render, but for the
// intended differences: the chart pulls the published image (the overlays name a local one, which
// make deploy and make release replace) and has an uninstall hook (a Helm hook, not an object of
// the release); the overlays' Namespace is not in the chart (compare leaves it out).
var overlayValues = []string{"image.repository=cos-externalizer", "uninstallHook.enabled=false"}

// TestChartMatchesOverlays: `helm template` of each mode with default values (and overlayValues)
// holds the objects of its overlay, equal but for Helm's labels and the overlay's Namespace; with
// metrics.serviceMonitor.enabled also those of its monitoring overlay (config/prometheus/<overlay>
// where there is one, else config/prometheus).
func TestChartMatchesOverlays(t *testing.T) {
	for overlay, m := range modes {
		set := slices.Concat(overlayValues, m.set)
		t.Run(overlay, func(t *testing.T) {
			compare(t, helmTemplate(t, set...), kustomize(t, overlay))
		})
		t.Run(overlay+"+monitoring", func(t *testing.T) {
			want := append(kustomize(t, overlay), kustomizeMonitoring(t, overlay)...)
			compare(t, helmTemplate(t, append(set, "metrics.serviceMonitor.enabled=true")...), want)
		})
	}
}

// kustomizeMonitoring renders the monitoring objects that go beside an install overlay:
// config/prometheus, with config/prometheus/<overlay> where there is one (a Component over it, or an
// overlay of its own).
func kustomizeMonitoring(t *testing.T, overlay string) []*unstructured.Unstructured {
	t.Helper()
	own := testenv.RepoPath(t, "config", "prometheus", overlay)
	b, err := os.ReadFile(filepath.Join(own, "kustomization.yaml"))
	if err != nil {
		return kustomize(t, "prometheus")
	}
	if !strings.Contains(string(b), "\nkind: Component\n") {
		return kustomize(t, filepath.Join("prometheus", overlay))
	}
	return kustomizeWithComponent(t, testenv.RepoPath(t, "config", "prometheus"), own)
}

// kustomizeWithComponent renders the kustomization at base with the Component at component over it
// (both absolute paths).
func kustomizeWithComponent(t *testing.T, base, component string) []*unstructured.Unstructured {
	t.Helper()
	// kustomize takes relative paths only.
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + rel(base) + "\ncomponents:\n- " + rel(component) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := testenv.MustKubectl(t, nil, "kustomize", dir)
	return parse(t, []byte(out))
}

// TestChartServerDryRun has the API server accept a server-side dry run of each mode's rendering,
// with monitoring on (schemas, CEL, RBAC escalation checks, Pod Security of the namespace).
func TestChartServerDryRun(t *testing.T) {
	ctx := context.Background()
	for _, dir := range []string{certManagerCRDs(t), prometheusOperatorCRDs(t)} {
		if _, err := controlplane.InstallCRDs(ctx, testenv.Env.Config, dir); err != nil {
			t.Fatal(err)
		}
	}
	// Namespaced objects cannot be dry-run into a missing namespace.
	testenv.Env.EnsureNamespace(t, namespace)
	for overlay, m := range modes {
		t.Run(overlay, func(t *testing.T) {
			yaml := helmTemplateYAML(t, append(m.set, "metrics.serviceMonitor.enabled=true")...)
			out, stderr := testenv.MustKubectl(t, yaml, "apply", "--server-side", "--dry-run=server", "--field-manager="+fieldManager, "-f", "-")
			if strings.Contains(stderr, "Warning") {
				t.Errorf("the dry run warned:\n%s", stderr)
			}
			if n, want := strings.Count(out, "(server dry run)"), len(parse(t, yaml)); n != want {
				t.Errorf("the dry run applied %d objects, the chart renders %d:\n%s", n, want, out)
			}
		})
	}
}

// TestChartInstall installs the chart over a CRD an earlier install kept, into a namespace created
// first (--take-ownership adopts the CRD), and uninstalls it without its hook: hack/uninstall.sh on
// the release's manifest, then helm uninstall --no-hooks; the CRD and the namespace stay. Installed
// again under the same name into the same namespace, it needs no --take-ownership (the CRD is still
// marked as the release's), and after its uninstall the commands its notes print remove what is left
// (checkLeftovers).
func TestChartInstall(t *testing.T) {
	ctx := context.Background()
	// The namespace stays: a new one for each run (-count).
	installs++
	ns := fmt.Sprintf("platform-%d", installs)
	testenv.MustKubectl(t, nil, "create", "namespace", ns)
	env := []string{"KUBECONFIG=" + testenv.Env.Kubeconfig}
	out, err := helmEnv(t, env, "install", release, chartDir(t), "-n", ns, "--take-ownership", "--set", "mode=self-signed")
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Logf("helm install:\n%s", out)
	for name, obj := range map[string]client.Object{"cos-externalizer": &appsv1.Deployment{}, "cos-externalizer-webhook": &corev1.Service{}} {
		if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			t.Errorf("after helm install: %v", err)
		}
	}

	manifest, err := helmEnv(t, env, "get", "manifest", release, "-n", ns)
	if err != nil {
		t.Fatalf("helm get manifest: %v\n%s", err, manifest)
	}
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(filepath.Dir(filepath.Dir(chartDir(t))), "hack", "uninstall.sh"), "-f", file)
	cmd.Env = append(os.Environ(), "KUBECTL="+kubectl, "KUBECONFIG="+testenv.Env.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/uninstall.sh -f manifest.yaml: %v\n%s", err, out)
	}
	// The pre-delete hook's Job needs a kubelet to run (TestUninstallHook checks what it would do).
	if out, err := helmEnv(t, env, "uninstall", release, "-n", ns, "--wait", "--no-hooks"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cos-externalizer"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment after helm uninstall: %v, want NotFound", err)
	}
	for _, obj := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "clusterobjectsets.olm.operatorframework.io"}}} {
		if err := testenv.Env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil || obj.GetDeletionTimestamp() != nil {
			t.Errorf("%T %s after helm uninstall: %v, deleting %v; want kept", obj, obj.GetName(), err, obj.GetDeletionTimestamp())
		}
	}

	// The same release again: the kept CRD carries its name and namespace, so Helm adopts it.
	out, err = helmEnv(t, env, "install", release, chartDir(t), "-n", ns, "--set", "mode=self-signed", "--set", "uninstallHook.enabled=false")
	if err != nil {
		t.Fatalf("helm install of the same release again, without --take-ownership: %v\n%s", err, out)
	}
	_, notes, ok := strings.Cut(out, "NOTES:")
	if !ok {
		t.Fatalf("no notes in:\n%s", out)
	}
	if out, err := helmEnv(t, env, "uninstall", release, "-n", ns, "--wait", "--no-hooks"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	checkLeftovers(t, ns, notes)
}

var installs int

// checkLeftovers runs the commands the notes (of a self-signed release in ns, uninstalled) print to
// remove what helm uninstall leaves, on what a manager would have left: object-data and quarantine
// Secrets, the sweep's ConfigMap, the Lease, the CA Secret, and a ClusterObjectSet with an object it
// installed. They go, the object stays without its owner, and the CRD goes (installed again after,
// for the other tests). Every kubectl command of the notes takes the namespace, but those of
// cluster-scoped objects.
func checkLeftovers(t *testing.T, ns, notes string) {
	ctx := context.Background()
	c := testenv.Env.Client
	if strings.Contains(notes, olmv1.DefaultSystemNamespace) {
		t.Errorf("the notes of a release in %s name %s:\n%s", ns, olmv1.DefaultSystemNamespace, notes)
	}
	var commands [][]string
	leftovers := false // past the heading of what helm uninstall leaves
	for _, line := range strings.Split(notes, "\n") {
		line = strings.TrimSpace(line)
		leftovers = leftovers || strings.HasPrefix(line, "What helm uninstall leaves")
		switch {
		case strings.HasPrefix(line, "helm ") && !strings.Contains(line, " -n "+ns):
			t.Errorf("the notes print %q, without -n %s", line, ns)
		case !strings.HasPrefix(line, "kubectl "):
		case strings.Contains(line, " -n "+ns+" "), strings.HasSuffix(line, " -n "+ns), line == "kubectl cos check",
			strings.HasPrefix(line, "kubectl delete clusterobjectsets "), strings.HasPrefix(line, "kubectl delete crd "):
			if leftovers {
				commands = append(commands, strings.Fields(line)[1:])
			}
		default:
			t.Errorf("the notes print %q, without -n %s", line, ns)
		}
	}
	if len(commands) < 5 {
		t.Fatalf("the notes print %d commands that remove what is left:\n%s", len(commands), notes)
	}

	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	}
	cos := builders.COS("helm-leftover", builders.WithPhase("configuration", builders.InlineConfigMaps(ns, "helm-leftover", 1)...))
	if err := c.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	installed := &corev1.ConfigMap{ObjectMeta: meta("helm-leftover-installed", nil)}
	installed.OwnerReferences = []metav1.OwnerReference{{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind,
		Name: cos.Name, UID: cos.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	gone := []client.Object{
		&corev1.Secret{ObjectMeta: meta("helm-leftover-data", map[string]string{olmv1.LabelRevisionName: cos.Name})},
		&corev1.Secret{ObjectMeta: meta("cos-quarantine-helm-leftover", map[string]string{"cos-externalizer.io/quarantine": "true"})},
		&corev1.Secret{ObjectMeta: meta("cos-externalizer-webhook-ca", nil)},
		&corev1.ConfigMap{ObjectMeta: meta("cos-externalizer-orphan-sweep", nil)},
		&coordinationv1.Lease{ObjectMeta: meta(olmv1.LeaderElectionLease, nil)},
	}
	for _, o := range append([]client.Object{installed}, gone...) {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		framework.Delete(ctx, t, c, installed)
		dir, err := controlplane.CRDDir()
		if err == nil {
			_, err = controlplane.InstallCRDs(ctx, testenv.Env.Config, dir)
		}
		if err != nil {
			t.Errorf("installing the CRD again: %v", err)
		}
	})

	for _, args := range commands {
		if args[0] == "delete" && args[1] == "namespace" {
			continue // the others, one by one
		}
		out, stderr := testenv.MustKubectl(t, nil, args...)
		t.Logf("kubectl %s:\n%s%s", strings.Join(args, " "), out, stderr)
	}
	for _, o := range append(gone, cos, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}}) {
		framework.WaitGone(ctx, t, c, o)
	}
	framework.Eventually(ctx, t, "the installed ConfigMap kept, without its owner", func(ctx context.Context) (bool, string) {
		got := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(installed), got); err != nil {
			return false, err.Error()
		}
		return len(got.OwnerReferences) == 0, fmt.Sprintf("owners %v", got.OwnerReferences)
	})
}

// TestChartLint runs `helm lint --strict` in every mode, with monitoring off and on.
func TestChartLint(t *testing.T) {
	for overlay, m := range modes {
		for _, monitoring := range []string{"false", "true"} {
			args := []string{"lint", "--strict", chartDir(t)}
			for _, s := range append(m.set, "metrics.serviceMonitor.enabled="+monitoring) {
				args = append(args, "--set", s)
			}
			if out, err := helm(t, args...); err != nil {
				t.Errorf("%s, monitoring %s: helm lint: %v\n%s", overlay, monitoring, err, out)
			}
		}
	}
}

// TestChartValues: each value lands at its path (and only changes what it should), and the schema
// refuses what the manager could not run with.
func TestChartValues(t *testing.T) {
	type check struct {
		kind, name string
		path       []string
		want       any
	}
	manager := func(field string) []string {
		return []string{"spec", "template", "spec", "containers", "0", field}
	}
	pod := func(field string) []string { return []string{"spec", "template", "spec", field} }
	guard := []string{"webhooks", "0", "matchConditions", "0", "expression"}
	nsController := "system:serviceaccount:kube-system:namespace-controller"
	for name, tc := range map[string]struct {
		set    []string
		checks []check
		// appends adds arguments to the manager: its Deployment is not compared beyond the checks.
		appends bool
	}{
		"replicas": {[]string{"replicas=5"}, []check{{"Deployment", "cos-externalizer", []string{"spec", "replicas"}, int64(5)}}, false},
		"image tag": {[]string{"image.repository=registry.example.com/cos", "image.tag=v1.2.3", "image.pullPolicy=IfNotPresent"}, []check{
			{"Deployment", "cos-externalizer", manager("image"), "registry.example.com/cos:v1.2.3"},
			{"Deployment", "cos-externalizer", manager("imagePullPolicy"), "IfNotPresent"},
		}, false},
		"image digest": {[]string{"image.repository=registry.example.com/cos", "image.tag=v1", "image.digest=sha256:" + strings.Repeat("ab", 32)}, []check{
			{"Deployment", "cos-externalizer", manager("image"), "registry.example.com/cos@sha256:" + strings.Repeat("ab", 32)},
		}, false},
		"resources": {[]string{"resources.limits.memory=2Gi", "resources.requests.cpu=250m"}, []check{
			{"Deployment", "cos-externalizer", append(manager("resources"), "limits", "memory"), "2Gi"},
			{"Deployment", "cos-externalizer", append(manager("resources"), "requests", "cpu"), "250m"},
		}, false},
		"scheduling": {[]string{"nodeSelector.pool=system", "tolerations[0].key=dedicated", "tolerations[0].operator=Exists",
			"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
			"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
			"priorityClassName=platform-critical"}, []check{
			// Merged into the overlay's nodeSelector.
			{"Deployment", "cos-externalizer", append(pod("nodeSelector"), "pool"), "system"},
			{"Deployment", "cos-externalizer", pod("tolerations"), []any{map[string]any{"key": "dedicated", "operator": "Exists"}}},
			{"Deployment", "cos-externalizer", pod("affinity"), map[string]any{"nodeAffinity": map[string]any{
				"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
					map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "Exists"}}},
				}},
			}}},
			{"Deployment", "cos-externalizer", pod("priorityClassName"), "platform-critical"},
		}, false},
		"no nodeSelector": {[]string{"nodeSelector=null", "priorityClassName="}, []check{
			{"Deployment", "cos-externalizer", pod("nodeSelector"), nil},
			{"Deployment", "cos-externalizer", pod("priorityClassName"), nil},
		}, false},
		"exempt users": {[]string{"secretGuard.extraExemptUsers={system:serviceaccount:backup:velero,alice}"}, []check{
			{"ValidatingWebhookConfiguration", "cos-externalizer", guard,
				"!(request.userInfo.username in ['" + nsController + "', 'system:serviceaccount:backup:velero', 'alice'])"},
			{"Deployment", "cos-externalizer", append(manager("args"), "-1"),
				"--secret-guard-exempt-users=" + nsController + ",system:serviceaccount:backup:velero,alice"},
		}, true},
		"metrics": {[]string{"metrics.port=9090", "metrics.secure=false", "metrics.serviceMonitor.enabled=true"}, []check{
			{"Deployment", "cos-externalizer", append(manager("args"), "1"), "--metrics-bind-address=:9090"},
			{"Deployment", "cos-externalizer", append(manager("args"), "-1"), "--metrics-secure=false"},
			{"Deployment", "cos-externalizer", append(manager("ports"), "1", "containerPort"), int64(9090)},
			{"ServiceMonitor", "cos-externalizer", []string{"spec", "endpoints", "0", "scheme"}, "http"},
		}, true},
		"log": {[]string{"logLevel=debug", "logFormat=console"}, []check{
			{"Deployment", "cos-externalizer", append(manager("args"), "-2"), "--zap-log-level=debug"},
			{"Deployment", "cos-externalizer", append(manager("args"), "-1"), "--zap-encoder=console"},
		}, true},
		"extra args and env": {[]string{"extraArgs={--externalize=always}", "extraEnv[0].name=GOGC", "extraEnv[0].value=off"}, []check{
			{"Deployment", "cos-externalizer", append(manager("args"), "-1"), "--externalize=always"},
			{"Deployment", "cos-externalizer", append(manager("env"), "-1"), map[string]any{"name": "GOGC", "value": "off"}},
		}, true},
		"pod metadata and pull secrets": {[]string{"podLabels.team=platform", "podAnnotations.owner=platform", "imagePullSecrets[0].name=regcred"}, []check{
			{"Deployment", "cos-externalizer", []string{"spec", "template", "metadata", "labels", "team"}, "platform"},
			{"Deployment", "cos-externalizer", []string{"spec", "template", "metadata", "annotations", "owner"}, "platform"},
			{"Deployment", "cos-externalizer", pod("imagePullSecrets"), []any{map[string]any{"name": "regcred"}}},
		}, false},
		"disruption budget": {[]string{"podDisruptionBudget.maxUnavailable=50%"}, []check{
			{"PodDisruptionBudget", "cos-externalizer", []string{"spec", "maxUnavailable"}, "50%"},
			{"PodDisruptionBudget", "cos-externalizer", []string{"spec", "minAvailable"}, nil},
		}, false},
		"crds not kept": {[]string{"crds.keep=false"}, []check{
			{"CustomResourceDefinition", "clusterobjectsets.olm.operatorframework.io", []string{"metadata", "annotations", "helm.sh/resource-policy"}, nil},
		}, false},
	} {
		t.Run(name, func(t *testing.T) {
			objs := helmTemplate(t, tc.set...)
			for _, c := range tc.checks {
				u := find(objs, c.kind, c.name)
				if u == nil {
					t.Fatalf("no %s %s", c.kind, c.name)
				}
				if diff := cmp.Diff(c.want, at(u.Object, c.path)); diff != "" {
					t.Errorf("%s %s %s (-want +got):\n%s", c.kind, c.name, strings.Join(c.path, "."), diff)
				}
			}
			// Nothing else changes: the Deployment's other fields are the default rendering's.
			if !tc.appends {
				changed := func(u *unstructured.Unstructured) {
					for _, c := range tc.checks {
						if c.kind == u.GetKind() {
							setAt(u.Object, c.path)
						}
					}
				}
				defaults := helmTemplate(t, "metrics.serviceMonitor.enabled=true")
				for _, u := range objs {
					d := find(defaults, u.GetKind(), u.GetName())
					if d == nil || u.GetKind() != "Deployment" {
						continue
					}
					u, d = u.DeepCopy(), d.DeepCopy()
					changed(u)
					changed(d)
					if diff := cmp.Diff(d.Object, u.Object); diff != "" {
						t.Errorf("the Deployment changed beyond the checked paths (-default +set):\n%s", diff)
					}
				}
			}
		})
	}

	t.Run("off", func(t *testing.T) {
		for set, kinds := range map[string][]string{
			"crds.enabled=false":                {"CustomResourceDefinition"},
			"podDisruptionBudget.enabled=false": {"PodDisruptionBudget"},
			"uninstallHook.enabled=false":       {"Job"},
		} {
			on, off := kindsOf(helmTemplate(t)), kindsOf(helmTemplate(t, set))
			for _, k := range kinds {
				if !on[k] || off[k] {
					t.Errorf("--set %s: %s rendered %v by default, %v with it; want only by default", set, k, on[k], off[k])
				}
			}
		}
	})

	t.Run("release namespace", func(t *testing.T) {
		for overlay, m := range modes {
			for _, u := range helmTemplateIn(t, "platform", m.set...) {
				if ns := u.GetNamespace(); ns != "" && ns != "platform" {
					t.Errorf("%s: %s %s in namespace %s", overlay, u.GetKind(), u.GetName(), ns)
				}
				b, err := u.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range []string{`"` + namespace + `"`, namespace + ".svc", namespace + "/"} {
					if strings.Contains(string(b), s) {
						t.Errorf("%s: %s %s still names %s (%s)", overlay, u.GetKind(), u.GetName(), namespace, s)
					}
				}
			}
		}
	})

	t.Run("schema", func(t *testing.T) {
		for _, set := range []string{"mode=olm", "replicas=0", "image.digest=latest", "metrics.port=70000",
			"secretGuard.extraExemptUsers={it's}", "unknown=1", "logLevel=verbose", "logFormat=text",
			"extraArgs={externalize}", "podDisruptionBudget.maxUnavailable=half", "extraEnv[0].value=x"} {
			if out, err := helm(t, "template", release, chartDir(t), "-n", namespace, "--set", set); err == nil {
				t.Errorf("--set %s: rendered, want refused by the schema", set)
			} else if !strings.Contains(out, "schema") {
				t.Errorf("--set %s: %v, want a schema error:\n%s", set, err, out)
			}
		}
	})
}

// compare checks that got holds the objects of want, equal but for the labels Helm's charts add
// and kustomize's managed-by.
func compare(t *testing.T, got, want []*unstructured.Unstructured) {
	t.Helper()
	index := func(objs []*unstructured.Unstructured) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, u := range objs {
			u = u.DeepCopy()
			labels := u.GetLabels()
			if labels["app.kubernetes.io/managed-by"] == "Helm" || labels["app.kubernetes.io/managed-by"] == "kustomize" {
				delete(labels, "app.kubernetes.io/managed-by")
			}
			for _, k := range []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version"} {
				delete(labels, k)
			}
			u.SetLabels(labels)
			if u.GetKind() == "Namespace" {
				continue // Helm's (--create-namespace), not the chart's
			}
			key := u.GroupVersionKind().GroupKind().String() + " " + u.GetNamespace() + "/" + u.GetName()
			if _, dup := out[key]; dup {
				t.Errorf("%s twice", key)
			}
			out[key] = u.Object
		}
		return out
	}
	if diff := cmp.Diff(index(want), index(got)); diff != "" {
		t.Errorf("helm template differs from the overlay (-overlay +chart):\n%s", diff)
	}
}

// kindsOf is the set of the objects' kinds.
func kindsOf(objs []*unstructured.Unstructured) map[string]bool {
	kinds := map[string]bool{}
	for _, u := range objs {
		kinds[u.GetKind()] = true
	}
	return kinds
}

func chartDir(t *testing.T) string {
	t.Helper()
	return testenv.RepoPath(t, "charts", "cos-externalizer")
}

// helm runs bin/helm (make helm) with no cluster, returning its combined output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return helmEnv(t, []string{"KUBECONFIG=/dev/null"}, args...)
}

// helmEnv runs bin/helm with env (and a HOME of its own).
func helmEnv(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	bin, err := controlplane.Binary("helm")
	if err != nil {
		t.Fatalf("%v (make helm)", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"HOME=" + t.TempDir()}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func helmTemplateYAML(t *testing.T, set ...string) []byte {
	t.Helper()
	return helmTemplateYAMLIn(t, namespace, set...)
}

func helmTemplateYAMLIn(t *testing.T, ns string, set ...string) []byte {
	t.Helper()
	args := []string{"template", release, chartDir(t), "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	bin, err := controlplane.Binary("helm")
	if err != nil {
		t.Fatalf("%v (make helm)", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "KUBECONFIG=/dev/null"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func helmTemplate(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	return parse(t, helmTemplateYAML(t, set...))
}

func helmTemplateIn(t *testing.T, ns string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	return parse(t, helmTemplateYAMLIn(t, ns, set...))
}

// kustomize renders config/<overlay> with the control plane's kubectl.
func kustomize(t *testing.T, overlay string) []*unstructured.Unstructured {
	t.Helper()
	return parse(t, testenv.Kustomize(t, overlay))
}

func parse(t *testing.T, yaml []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Parse(yaml)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("no objects rendered")
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// at returns the value at path: map keys and list indexes (-1 the last item, -2 the one before);
// nil when missing.
func at(v any, path []string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i := index(p, len(x))
			if i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// setAt blanks the value at path, so that two objects compare without it.
func setAt(v any, path []string) {
	parent := at(v, path[:len(path)-1])
	switch x := parent.(type) {
	case map[string]any:
		delete(x, path[len(path)-1])
	case []any:
		if i := index(path[len(path)-1], len(x)); i >= 0 && i < len(x) {
			x[i] = nil
		}
	}
}

func index(p string, n int) int {
	if back, ok := strings.CutPrefix(p, "-"); ok {
		if i := index(back, n); i > 0 {
			return n - i
		}
		return -1
	}
	i := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return -1
		}
		i = i*10 + int(c-'0')
	}
	return i
}

// certManagerCRDs is the folder of cert-manager's CRDs (make certmanager-crds).
func certManagerCRDs(t *testing.T) string {
	t.Helper()
	dir, err := controlplane.CertManagerCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// prometheusOperatorCRDs is a folder with the Prometheus Operator's CRDs that config/prometheus uses,
// from the test bundle of `make testdata`.
func prometheusOperatorCRDs(t *testing.T) string {
	t.Helper()
	bundle, err := builders.BundleDir("prometheus-operator-crds")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		b, err := os.ReadFile(filepath.Join(bundle, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
