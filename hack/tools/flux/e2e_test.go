//go:build gitops_e2e

package flux_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// Where make test-gitops puts what the test runs: the controllers built by hack/tools/fluxcontrollers,
// and their modules' folders (for their CRDs).
const (
	envBinDir         = "FLUX_BIN_DIR"
	envSourceDir      = "FLUX_SOURCE_CONTROLLER_DIR"
	envKustomizeDir   = "FLUX_KUSTOMIZE_CONTROLLER_DIR"
	fluxNamespace     = "flux-system"
	appsNamespace     = "flux-apps"
	requestedAtAnnot  = "reconcile.fluxcd.io/requestedAt"
	largeConfigMapKiB = 600
)

var (
	gitRepositoryGVR = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	kustomizationGVR = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	gadgetGVR        = schema.GroupVersionResource{Group: "flux.example.com", Version: "v1", Resource: "gadgets"}
)

// shiftedClock runs the reconciler 15 minutes ahead: a 10-minute progress deadline has passed for
// every ClusterObjectSet at its creation.
type shiftedClock struct{ clock.RealClock }

func (shiftedClock) Now() time.Time { return time.Now().Add(15 * time.Minute) }

// TestFluxEndToEnd runs Flux's source-controller and kustomize-controller as processes against the
// local control plane and the manager with its webhooks, with the repository served over Git's smart
// HTTP protocol from a local folder (git http-backend). A Kustomization holding a large inline
// ClusterObjectSet (over etcd's object limit: the webhook externalizes it) with wait: true and the
// healthCheckExprs of docs/gitops.md, and one that dependsOn it: the second applies only once the set
// has succeeded. A set past its progress deadline fails its Kustomization, which names it. Two more
// reconciles find no drift on the externalized set and prune nothing.
func TestFluxEndToEnd(t *testing.T) {
	binDir, sourceDir, kustomizeDir := os.Getenv(envBinDir), os.Getenv(envSourceDir), os.Getenv(envKustomizeDir)
	if binDir == "" || sourceDir == "" || kustomizeDir == "" {
		t.Fatalf("%s, %s and %s must be set: run make test-gitops", envBinDir, envSourceDir, envKustomizeDir)
	}
	env := testenv.StartFor(t)
	ctx := context.Background()
	mgr, err := env.StartManagerWith(ctx, func(o *app.Options) { o.Clock = shiftedClock{} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Stop() })
	env.EnsureNamespace(t, fluxNamespace)
	env.EnsureNamespace(t, appsNamespace)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	for _, dir := range []string{sourceDir, kustomizeDir} {
		mustKubectl(t, env, "apply", "--server-side", "-f", filepath.Join(dir, "config", "crd", "bases"))
	}
	mustKubectl(t, env, "wait", "--for=condition=Established", "--timeout=60s", "crd/gitrepositories.source.toolkit.fluxcd.io", "crd/kustomizations.kustomize.toolkit.fluxcd.io")

	repoURL := serveRepo(t, map[string][]byte{
		"sets/operator.yaml": yamlOf(t, largeSet(t)),
		"apps/gadget.yaml":   yamlOf(t, gadget()),
		"failing/failing.yaml": yamlOf(t, builders.COS("flux-failing", builders.WithProgressDeadline(10),
			builders.WithAnnotations(map[string]string{olmv1.AnnotationBundleVersion: "2.0.0"}),
			builders.WithPhase("storage", builders.Inline(pvc(appsNamespace, "never", "no-such-pv"))))),
	})
	logs := startControllers(t, env, binDir)

	exprs := healthCheckExprsOf(t)
	create(ctx, t, dyn, gitRepositoryGVR, map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
		"metadata": map[string]any{"name": "repo", "namespace": fluxNamespace},
		"spec":     map[string]any{"url": repoURL, "interval": "1m", "ref": map[string]any{"branch": "main"}},
	})
	kustomization := func(name, path string, extra map[string]any) map[string]any {
		spec := map[string]any{"interval": "1h", "retryInterval": "2s", "path": path, "prune": true,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "repo"}}
		for k, v := range extra {
			spec[k] = v
		}
		return map[string]any{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
			"metadata": map[string]any{"name": name, "namespace": fluxNamespace}, "spec": spec}
	}
	create(ctx, t, dyn, kustomizationGVR, kustomization("sets", "./sets", map[string]any{"wait": true, "timeout": "5m", "healthCheckExprs": exprs}))
	create(ctx, t, dyn, kustomizationGVR, kustomization("apps", "./apps", map[string]any{"dependsOn": []any{map[string]any{"name": "sets"}}}))
	create(ctx, t, dyn, kustomizationGVR, kustomization("failing", "./failing", map[string]any{"wait": true, "timeout": "5m", "healthCheckExprs": exprs}))

	t.Run("dependsOn waits for the set to succeed", func(t *testing.T) {
		// The set is stored, externalized, and rolls out, held by its claim.
		env.WaitForCondition(t, "flux-operator", olmv1.ConditionAvailable, metav1.ConditionFalse, olmv1.ReasonProbeFailure)
		stored := &olmv1.ClusterObjectSet{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "flux-operator"}, stored); err != nil {
			t.Fatal(err)
		}
		for _, p := range stored.Spec.Phases {
			for i, o := range p.Objects {
				if o.Ref.Name == "" {
					t.Errorf("phase %s object %d is stored inline: the webhook did not externalize the set", p.Name, i)
				}
			}
		}
		waitKustomization(ctx, t, dyn, "apps", "False", "DependencyNotReady")
		if r := ready(ctx, t, dyn, "sets"); r.status == "True" {
			t.Fatalf("Kustomization sets is Ready while the set rolls out: %s", r)
		}
		if _, err := dyn.Resource(gadgetGVR).Namespace(appsNamespace).Get(ctx, "my-gadget", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the dependent Gadget while the set rolls out: %v, want not found", err)
		}

		createVolume(ctx, t, env, "flux-pv")
		env.WaitForCondition(t, "flux-operator", olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
		setsReady := waitKustomization(ctx, t, dyn, "sets", "True", "ReconciliationSucceeded")
		waitKustomization(ctx, t, dyn, "apps", "True", "ReconciliationSucceeded")
		g, err := dyn.Resource(gadgetGVR).Namespace(appsNamespace).Get(ctx, "my-gadget", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the dependent Gadget after the set succeeded: %v", err)
		}
		if created := g.GetCreationTimestamp().Time; created.Before(setsReady.since.Add(-time.Second)) {
			t.Errorf("the Gadget was created at %s, before Kustomization sets turned Ready at %s", created, setsReady.since)
		}
	})

	t.Run("a failed set fails its Kustomization, named", func(t *testing.T) {
		env.WaitForCondition(t, "flux-failing", olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonProgressDeadlineExceeded)
		r := waitKustomization(ctx, t, dyn, "failing", "False", "HealthCheckFailed")
		if want := "ClusterObjectSet/flux-failing status: 'Failed'"; !strings.Contains(r.message, want) {
			t.Errorf("Kustomization failing: %q, want it to contain %q", r.message, want)
		}
		t.Logf("Kustomization failing: %s", r)
	})

	t.Run("two more reconciles: no drift, nothing pruned", func(t *testing.T) {
		before := &olmv1.ClusterObjectSet{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "flux-operator"}, before); err != nil {
			t.Fatal(err)
		}
		secrets := testenv.ResourceVersions(env.ObjectDataSecrets(t, before.Name))
		events := setEvents(ctx, t, env)
		mark := logs.mark()
		for i := range 2 {
			requestReconcile(ctx, t, dyn, "sets", fmt.Sprintf("drift-%d-%d", i, time.Now().UnixNano()))
		}
		after := &olmv1.ClusterObjectSet{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "flux-operator"}, after); err != nil {
			t.Fatal(err)
		}
		if after.UID != before.UID || after.ResourceVersion != before.ResourceVersion {
			t.Errorf("the set changed across two reconciles: uid %s -> %s, resourceVersion %s -> %s", before.UID, after.UID, before.ResourceVersion, after.ResourceVersion)
		}
		if got := testenv.ResourceVersions(env.ObjectDataSecrets(t, after.Name)); fmt.Sprint(got) != fmt.Sprint(secrets) {
			t.Errorf("the set's Secrets changed across two reconciles: %v -> %v", secrets, got)
		}
		for _, line := range logs.since(mark) {
			// An apply logs each object it applied with its action: unchanged is the only one allowed.
			if strings.Contains(line, "ClusterObjectSet/flux-operator") && !strings.Contains(line, `"ClusterObjectSet/flux-operator":"unchanged"`) {
				t.Errorf("kustomize-controller reported the set on a reconcile with nothing to do: %s", line)
			}
		}
		for key, count := range setEvents(ctx, t, env) {
			if count != events[key] {
				t.Errorf("new event naming the set: %s", key)
			}
		}
	})
}

// setEvents counts the events of Kustomization sets that name the ClusterObjectSet flux-operator
// (kustomize-controller lists what it created, configured or deleted), by reason and message.
func setEvents(ctx context.Context, t *testing.T, env *testenv.Environment) map[string]int32 {
	t.Helper()
	list, err := env.Clientset.CoreV1().Events(fluxNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=sets"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, e := range list.Items {
		if strings.Contains(e.Message, "ClusterObjectSet/flux-operator") {
			out[e.Reason+": "+e.Message] += max(e.Count, 1)
		}
	}
	return out
}

// largeSet is a ClusterObjectSet over etcd's 1.5 MiB object limit: a CRD, a claim of flux-pv that
// holds the rollout until the test creates the volume, and large ConfigMaps.
func largeSet(t *testing.T) *olmv1.ClusterObjectSet {
	t.Helper()
	var big []olmv1.ClusterObjectSetObject
	for i := range 3 {
		cm := builders.ConfigMap(appsNamespace, "large-"+strconv.Itoa(i), map[string]string{"data": strings.Repeat(strconv.Itoa(i), largeConfigMapKiB<<10)})
		big = append(big, builders.Inline(cm))
	}
	return builders.COS("flux-operator", builders.WithAnnotations(map[string]string{olmv1.AnnotationBundleVersion: "1.0.0"}),
		builders.WithPhase("crds", builders.Inline(builders.CRD("flux.example.com", "Gadget"))),
		builders.WithPhase("storage", builders.Inline(pvc(appsNamespace, "gate", "flux-pv"))),
		builders.WithPhase("configuration", big...))
}

func gadget() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flux.example.com/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "my-gadget", "namespace": appsNamespace},
		"spec":     map[string]any{"size": "small"},
	}}
}

func pvc(ns, name, volume string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "storageClassName": "", "volumeName": volume,
			"resources": map[string]any{"requests": map[string]any{"storage": "1Mi"}}},
	}}
}

func createVolume(ctx context.Context, t *testing.T, env *testenv.Environment, name string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
	if _, err := env.Clientset.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// yamlOf renders an object as the file of a Git repository holds it.
func yamlOf(t *testing.T, obj any) []byte {
	t.Helper()
	var m map[string]any
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		m = o.Object
	case *olmv1.ClusterObjectSet:
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(o); err != nil {
			t.Fatal(err)
		}
		m["apiVersion"], m["kind"] = olmv1.GroupVersion.String(), olmv1.ClusterObjectSetKind
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(m, "status")
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveRepo commits files to a Git repository in a temporary folder and serves it with Git's smart
// HTTP protocol (git http-backend behind net/http/cgi) on a loopback port; it returns its URL.
func serveRepo(t *testing.T, files map[string][]byte) string {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed to serve the repository: %v", err)
	}
	dir := t.TempDir()
	work, root := filepath.Join(dir, "work"), filepath.Join(dir, "served")
	for name, b := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(gitBin, append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(work, "init", "-q")
	git(work, "add", ".")
	git(work, "commit", "-q", "-m", "ClusterObjectSets")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	git(root, "clone", "-q", "--bare", work, "repo.git")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &cgi.Handler{Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + lis.Addr().String() + "/repo.git"
}

// logLines collects the controllers' output.
type logLines struct {
	mu    sync.Mutex
	lines []string
	buf   bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.lines = append(l.lines, strings.TrimRight(line, "\n"))
	}
}

func (l *logLines) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *logLines) since(mark int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines[mark:]...)
}

// startControllers runs source-controller and kustomize-controller against the control plane, as
// their Deployments run them, on loopback ports; they are killed when the test ends. Their output
// is kept (and logged when the test fails).
func startControllers(t *testing.T, env *testenv.Environment, binDir string) *logLines {
	t.Helper()
	ports, err := controlplane.FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	storage := t.TempDir()
	logs := &logLines{}
	run := func(name string, args ...string) {
		cmd := exec.Command(filepath.Join(binDir, name), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "RUNTIME_NAMESPACE="+fluxNamespace)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	addr := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	run("source-controller", "--storage-path="+storage, "--storage-addr="+addr(ports[0]), "--storage-adv-addr="+addr(ports[0]),
		"--metrics-addr="+addr(ports[1]), "--health-addr="+addr(ports[2]), "--enable-leader-election=false", "--log-level=info")
	run("kustomize-controller", "--metrics-addr="+addr(ports[3]), "--health-addr="+addr(ports[4]), "--enable-leader-election=false",
		"--requeue-dependency=2s", "--log-level=info")
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range logs.since(0) {
				t.Log(l)
			}
		}
	})
	return logs
}

func healthCheckExprsOf(t *testing.T) []any {
	t.Helper()
	b, err := os.ReadFile(kustomizationFile)
	if err != nil {
		t.Fatal(err)
	}
	var k map[string]any
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	exprs, _, err := unstructured.NestedSlice(k, "spec", "healthCheckExprs")
	if err != nil || len(exprs) == 0 {
		t.Fatalf("%s: no spec.healthCheckExprs (%v)", kustomizationFile, err)
	}
	return exprs
}

func create(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

type readyCondition struct {
	status, reason, message string
	since                   time.Time
	lastHandled             string
}

func (r readyCondition) String() string {
	return fmt.Sprintf("Ready=%s/%s: %s", r.status, r.reason, r.message)
}

func ready(ctx context.Context, t *testing.T, dyn dynamic.Interface, name string) readyCondition {
	t.Helper()
	u, err := dyn.Resource(kustomizationGVR).Namespace(fluxNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var r readyCondition
	r.lastHandled, _, _ = unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var typed []metav1.Condition
	for _, c := range conds {
		var mc metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.(map[string]any), &mc); err == nil {
			typed = append(typed, mc)
		}
	}
	if c := apimeta.FindStatusCondition(typed, "Ready"); c != nil {
		r.status, r.reason, r.message, r.since = string(c.Status), c.Reason, c.Message, c.LastTransitionTime.Time
	}
	return r
}

// waitKustomization waits until the Kustomization's Ready condition has status and reason.
func waitKustomization(ctx context.Context, t *testing.T, dyn dynamic.Interface, name, status, reason string) readyCondition {
	t.Helper()
	var r readyCondition
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	framework.Eventually(wctx, t, fmt.Sprintf("Kustomization %s Ready=%s/%s", name, status, reason), func(ctx context.Context) (bool, string) {
		r = ready(ctx, t, dyn, name)
		return r.status == status && r.reason == reason, r.String()
	})
	return r
}

// requestReconcile asks for a reconcile now (as flux reconcile does) and waits until it is handled
// and Ready again.
func requestReconcile(ctx context.Context, t *testing.T, dyn dynamic.Interface, name, token string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, requestedAtAnnot, token)
	if _, err := dyn.Resource(kustomizationGVR).Namespace(fluxNamespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	framework.Eventually(wctx, t, "Kustomization "+name+" handled reconcile "+token, func(ctx context.Context) (bool, string) {
		r := ready(ctx, t, dyn, name)
		return r.lastHandled == token && r.status == "True", r.String() + " lastHandledReconcileAt=" + r.lastHandled
	})
}

func mustKubectl(t *testing.T, env *testenv.Environment, args ...string) {
	t.Helper()
	if _, stderr, err := env.Kubectl(t, nil, args...); err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, stderr)
	}
}
