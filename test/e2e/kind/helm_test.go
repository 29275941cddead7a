//go:build e2e_kind

package kind

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/e2e"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// The README's Helm install: release and namespace.
const (
	helmRelease   = "cos-externalizer"
	helmNamespace = "cos-system"
	// The namespaces of the probe Pods: one the chart's policies do not name, and the one whose Pods
	// the metrics policy admits to the metrics port.
	strangerNamespace   = "cos-e2e-stranger"
	monitoringNamespace = "monitoring"
	// Where the workload of the ClusterObjectSet that outlives the uninstall goes.
	workloadNamespace = "e2e-helm"
	// The ports of the chart's NetworkPolicies: the webhooks' (any address, or webhookIngressCIDRs)
	// and the metrics' (namespace monitoring only).
	webhookPort = 9443
	metricsPort = 8443
	// The finalizer the uninstall hook releases.
	teardownFinalizer = "olm.operatorframework.io/teardown"
	// What the chart names: the hook's Job, the leader Lease, cert-manager's Secrets.
	hookJob         = "cos-externalizer-uninstall"
	leaderLease     = "cos-externalizer.olm.operatorframework.io"
	caSecret        = "cos-externalizer-ca"
	servingSecret   = "cos-externalizer-webhook-cert"
	sweepConfigMap  = "cos-externalizer-orphan-sweep"
	objectDataLabel = "olm.operatorframework.io/revision-name"
	quarantineLabel = "cos-externalizer.io/quarantine"
	crdName         = "clusterobjectsets.olm.operatorframework.io"
)

// helmInstallInCosSystem is what a platform team does with the README on a cluster that enforces
// NetworkPolicies, with the API server on a node of its own (the cluster configs have a worker):
//
//  1. the client CA's ConfigMap in cos-system, then the README's line (`helm install cos-externalizer
//     <chart> --namespace cos-system --create-namespace`) with the image and webhookClientCA.configMap;
//     the notes name cos-system and nothing of olmv1-system;
//  2. the chart's default NetworkPolicies admit the API server (a dry run through the Service), a
//     replica refuses a caller without the API server's client certificate, a Pod of another namespace
//     reaches the webhook port but not the metrics port, which a Pod of namespace monitoring reaches;
//  3. `helm upgrade --reuse-values` with networkPolicy.webhookIngressCIDRs set to the nodes' addresses:
//     once a Pod of another namespace is refused on the webhook port, the API server's admissions still
//     pass (and the monitoring Pod still reaches the metrics port, so the refusal is the policy's);
//  4. a ClusterObjectSet with a Deployment, externalized and rolled out; then the notes' `helm
//     uninstall`: its pre-delete hook's Job runs to completion, the ClusterObjectSet and its workload
//     stay (finalizer released, nothing deleted), and what is left in cos-system and the cluster is
//     what docs/install.md and the notes list, nothing more;
//  5. the notes' removal commands, in their order: cos-system then holds only what every namespace
//     holds, the ClusterObjectSet and the CRD are gone, the Deployment it installed still runs.
//
// Each wait is for a condition; a verdict on a connection needs an answer (connected, or refused by
// the node), never a timeout.
func helmInstallInCosSystem(t *testing.T, c *cluster) {
	ctx := context.Background()
	probeImage := os.Getenv("E2E_PROBE_IMAGE")
	if probeImage == "" {
		t.Fatal("E2E_PROBE_IMAGE is empty: make test-e2e sets it to an image with bash for the probe Pods")
	}
	h := newHelm(t)
	t.Cleanup(func() { c.cleanUpHelm(h) })

	// 1. The README's line, after the ConfigMap of the client CA (docs/install.md: before the manager).
	if err := c.writeClientCA(ctx); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", helmRelease, filepath.Join(repoRoot, "charts", "cos-externalizer"),
		"--namespace", helmNamespace, "--create-namespace"}
	args = append(args, imageValues(t)...)
	if c.auth != nil {
		args = append(args, "--set", "webhookClientCA.configMap="+clientCAConfigMap)
	}
	notes := h.run(args...)
	c.Logf("helm install: %s", firstLine(notes))
	if !strings.Contains(notes, "installed in namespace "+helmNamespace) || strings.Contains(notes, olmv1.DefaultSystemNamespace) {
		t.Fatalf("the notes do not name namespace %s alone:\n%s", helmNamespace, notes)
	}
	if err := c.rolledOut(ctx); err != nil {
		t.Fatal(err)
	}

	// 2. The default policies.
	apiNode := c.apiServerNode(t)
	pods, err := c.pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A node's traffic to its own Pods passes every NetworkPolicy: the API server's admissions tell
	// something about the policies only for replicas on other nodes (cluster.yaml has a worker;
	// cluster-sources.yaml cannot, docs/e2e.md). The checks from the probe Pods hold either way.
	apiServerApart := true
	for _, p := range pods {
		if p.Spec.NodeName == apiNode {
			apiServerApart = false
		}
	}
	if err := c.routed(ctx); err != nil {
		t.Fatalf("the default NetworkPolicies: %v", err)
	}
	if apiServerApart {
		c.Logf("default NetworkPolicies: the API server (node %s) reaches the webhooks of %d replicas on other nodes", apiNode, len(pods))
	} else {
		c.Logf("the replicas share the API server's node %s, whose traffic to its own Pods passes every NetworkPolicy: its admissions below say nothing about the policies", apiNode)
	}
	if err := c.refusesStrangers(ctx); err != nil {
		t.Fatalf("caller authentication in %s: %v", helmNamespace, err)
	}
	stranger := c.probePod(t, strangerNamespace, probeImage)
	monitor := c.probePod(t, monitoringNamespace, probeImage)
	c.waitConnect(t, monitor, metricsPort, "the metrics port admits namespace monitoring")
	c.waitRefused(t, stranger, metricsPort, "the metrics port refuses other namespaces")
	c.waitConnect(t, stranger, webhookPort, "the webhook port admits any address by default")

	// 3. webhookIngressCIDRs: the nodes' addresses.
	cidrs := c.nodeCIDRs(t)
	h.run("upgrade", helmRelease, filepath.Join(repoRoot, "charts", "cos-externalizer"), "--namespace", helmNamespace, "--reuse-values",
		"--set-json", "networkPolicy.webhookIngressCIDRs="+jsonList(cidrs))
	c.waitRefused(t, stranger, webhookPort, "the webhook port refuses a Pod of another namespace once webhookIngressCIDRs is set")
	c.waitRefused(t, monitor, webhookPort, "the webhook port refuses namespace monitoring's Pod too")
	if err := c.rolledOut(ctx); err != nil {
		t.Fatal(err)
	}
	const dryRuns = 20
	for i := range dryRuns {
		probe := builders.COS(fmt.Sprintf("e2e-cidrs-%d", i), builders.WithPhase("config", builders.Inline(builders.ConfigMap("default", "e2e-cidrs", map[string]string{"k": "v"}))))
		if err := c.client.Create(ctx, probe, client.DryRunAll); err != nil {
			t.Fatalf("webhookIngressCIDRs %v: admission %d of %d through the Service: %v", cidrs, i+1, dryRuns, err)
		}
	}
	c.waitConnect(t, monitor, metricsPort, "the metrics port still admits namespace monitoring")
	c.Logf("webhookIngressCIDRs %v: %d admissions of %d passed; Pods of namespaces %s and %s refused on %d", cidrs, dryRuns, dryRuns, strangerNamespace, monitoringNamespace, webhookPort)

	// 4. A workload, then the notes' helm uninstall.
	cos := c.rollOutWorkload(t)
	secrets := &corev1.SecretList{}
	if err := c.client.List(ctx, secrets, client.InNamespace(helmNamespace), client.HasLabels{objectDataLabel}); err != nil || len(secrets.Items) == 0 {
		t.Fatalf("no object-data Secret in %s (%v): the ClusterObjectSet was not externalized", helmNamespace, err)
	}
	uninstall := commandOf(t, notes, "helm uninstall ")
	hook := c.watchJob(t, hookJob)
	out := h.run(strings.Fields(uninstall)[1:]...)
	c.Logf("%s: %s", uninstall, strings.Join(strings.Fields(out), " "))
	hook.waitCompleted(t)
	c.workloadStays(t, cos)
	c.Logf("after helm uninstall: ClusterObjectSet %s kept (finalizer released), its Deployment available", cos.Name)
	c.onlyDocumentedLeft(t)

	// 5. The notes' removal commands.
	for _, cmd := range removalCommands(t, notes) {
		run := exec.CommandContext(ctx, "bash", "-c", cmd)
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("the notes' %q: %v\n%s", cmd, err, out)
		}
	}
	c.onlyEveryNamespacesLeft(t)
	framework.WaitGone(ctx, t, c.client, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: cos.Name}})
	framework.WaitGone(ctx, t, c.client, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}})
	d := &appsv1.Deployment{}
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: workloadNamespace, Name: "kept"}, d); err != nil || d.DeletionTimestamp != nil || len(d.OwnerReferences) != 0 {
		t.Fatalf("the Deployment the ClusterObjectSet installed, after the notes' commands: %v, deleting %v, owners %v; want it kept, owned by nobody", err, d.DeletionTimestamp != nil, d.OwnerReferences)
	}
	c.Logf("the notes' removal commands: %s holds only what every namespace holds; the Deployment the ClusterObjectSet installed runs on", helmNamespace)
}

// repoRoot is the repository's root, from this package's folder (go test runs in it).
var repoRoot = filepath.Join("..", "..", "..")

// helmRunner runs E2E_HELM (make test-e2e sets it to bin/helm) with a home of its own.
type helmRunner struct {
	t    *testing.T
	bin  string
	home string
}

func newHelm(t *testing.T) helmRunner {
	bin := os.Getenv("E2E_HELM")
	if bin == "" {
		bin = "helm"
	}
	return helmRunner{t: t, bin: bin, home: t.TempDir()}
}

func (h helmRunner) output(args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+h.home, "XDG_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"XDG_CONFIG_HOME="+filepath.Join(h.home, "config"), "XDG_DATA_HOME="+filepath.Join(h.home, "data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (h helmRunner) run(args ...string) string {
	h.t.Helper()
	out, err := h.output(args...)
	if err != nil {
		h.t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// imageValues are the chart's values for IMG (repository:tag or repository@digest), the image make
// loaded into the nodes.
func imageValues(t *testing.T) []string {
	img := os.Getenv("IMG")
	if i := strings.Index(img, "@"); i > 0 {
		return []string{"--set", "image.repository=" + img[:i], "--set", "image.digest=" + img[i+1:]}
	}
	if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
		return []string{"--set", "image.repository=" + img[:i], "--set", "image.tag=" + img[i+1:]}
	}
	t.Fatalf("IMG %q: want repository:tag or repository@digest", img)
	return nil
}

func jsonList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// commandOf is the notes' command line that starts with prefix.
func commandOf(t *testing.T, notes, prefix string) string {
	t.Helper()
	for line := range strings.Lines(notes) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, prefix) {
			return line
		}
	}
	t.Fatalf("the notes print no %q:\n%s", prefix, notes)
	return ""
}

// removalCommands are the kubectl commands the notes print under "What helm uninstall leaves", in
// their order (not the alternative of deleting the namespace with everything in it).
func removalCommands(t *testing.T, notes string) []string {
	t.Helper()
	_, leaves, ok := strings.Cut(notes, "What helm uninstall leaves")
	if !ok {
		t.Fatalf("the notes do not say what helm uninstall leaves:\n%s", notes)
	}
	var cmds []string
	sc := bufio.NewScanner(strings.NewReader(leaves))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "kubectl ") {
			cmds = append(cmds, line)
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("the notes print no removal command:\n%s", leaves)
	}
	return cmds
}

// rolledOut waits for the Deployment's rollout and for the webhooks to be reached through their
// Service.
func (c *cluster) rolledOut(ctx context.Context) error {
	rollout := exec.CommandContext(ctx, "kubectl", "rollout", "status", "-n", c.Namespace(), "deployment/"+deployment, "--timeout=5m")
	if out, err := rollout.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl rollout status: %w\n%s", err, out)
	}
	return c.routed(ctx)
}

// apiServerNode is the node of the kube-apiserver Pod.
func (c *cluster) apiServerNode(t *testing.T) string {
	t.Helper()
	list := &corev1.PodList{}
	if err := c.client.List(context.Background(), list, client.InNamespace("kube-system"), client.MatchingLabels{"component": "kube-apiserver"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d kube-apiserver Pods, want 1", len(list.Items))
	}
	return list.Items[0].Spec.NodeName
}

// nodeCIDRs are the nodes' InternalIPs, each as a /32 (or /128): the ranges the API server reaches
// the Pods from.
func (c *cluster) nodeCIDRs(t *testing.T) []string {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := c.client.List(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			ip := net.ParseIP(a.Address)
			if a.Type != corev1.NodeInternalIP || ip == nil {
				continue
			}
			bits := 32
			if ip.To4() == nil {
				bits = 128
			}
			out = append(out, fmt.Sprintf("%s/%d", a.Address, bits))
		}
	}
	if len(out) == 0 {
		t.Fatal("no node has an InternalIP")
	}
	slices.Sort(out)
	return out
}

// probePod starts a Pod in namespace ns (made if missing) that idles, for kubectl exec to open
// connections from inside the pod network, and returns it once it runs.
func (c *cluster) probePod(t *testing.T, ns, image string) client.ObjectKey {
	t.Helper()
	ctx := context.Background()
	framework.EnsureNamespace(ctx, t, c.client, ns)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: map[string]string{"app.kubernetes.io/name": "cos-e2e-probe"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "probe", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"bash", "-c", "exec tail -f /dev/null"},
			}},
		},
	}
	if err := c.client.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.client.Delete(context.Background(), p, client.GracePeriodSeconds(0))
	})
	framework.Eventually(ctx, t, "probe Pod "+ns+"/probe to run", func(ctx context.Context) (bool, string) {
		got := &corev1.Pod{}
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == corev1.PodRunning, string(got.Status.Phase)
	})
	return client.ObjectKeyFromObject(p)
}

// Answers of a connection attempt from a probe Pod.
const (
	connected = "connected"
	refused   = "refused" // the node answered: connection refused, or no route to host
	noAnswer  = "no answer"
)

// connect opens a TCP connection from the probe Pod to the first replica's port (its Pod address,
// read anew each time) and says how it ended. A connection that neither opens nor is refused within
// the attempt's bound is "no answer", which decides nothing.
func (c *cluster) connect(ctx context.Context, probe client.ObjectKey, port int) (string, string) {
	p, err := c.pod(ctx, 0)
	if err != nil {
		return noAnswer, err.Error()
	}
	script := fmt.Sprintf("timeout 20 bash -c 'exec 3<>/dev/tcp/%s/%d' && echo %s", p.Status.PodIP, port, connected)
	out, err := exec.CommandContext(ctx, "kubectl", "exec", "-n", probe.Namespace, probe.Name, "--", "bash", "-c", script).CombinedOutput()
	text := strings.Join(strings.Fields(string(out)), " ")
	switch {
	case err == nil && strings.HasSuffix(text, connected):
		return connected, fmt.Sprintf("%s:%d connected", p.Status.PodIP, port)
	case strings.Contains(text, "Connection refused"), strings.Contains(text, "No route to host"):
		return refused, fmt.Sprintf("%s:%d: %s", p.Status.PodIP, port, text)
	default:
		return noAnswer, fmt.Sprintf("%s:%d: %v: %s", p.Status.PodIP, port, err, text)
	}
}

func (c *cluster) waitConnect(t *testing.T, probe client.ObjectKey, port int, what string) {
	t.Helper()
	c.waitAnswer(t, probe, port, connected, what)
}

func (c *cluster) waitRefused(t *testing.T, probe client.ObjectKey, port int, what string) {
	t.Helper()
	c.waitAnswer(t, probe, port, refused, what)
}

func (c *cluster) waitAnswer(t *testing.T, probe client.ObjectKey, port int, want, what string) {
	t.Helper()
	var last string
	framework.Eventually(context.Background(), t, what, func(ctx context.Context) (bool, string) {
		got, detail := c.connect(ctx, probe, port)
		last = detail
		return got == want, got + ": " + detail
	})
	c.Logf("%s (from %s): %s", what, probe, last)
}

// rollOutWorkload applies, through the webhooks, a ClusterObjectSet with a ConfigMap and a Deployment
// (of the runnable image where the nodes pull nothing) into workloadNamespace, externalized, and waits
// until it succeeded.
func (c *cluster) rollOutWorkload(t *testing.T) *olmv1.ClusterObjectSet {
	t.Helper()
	ctx := context.Background()
	framework.EnsureNamespace(ctx, t, c.client, workloadNamespace)
	image := c.RunnableImage()
	if image == "" {
		image = "registry.k8s.io/pause:3.10"
	}
	labels := map[string]any{"app.kubernetes.io/name": "e2e-helm-kept"}
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": workloadNamespace, "name": "kept"},
		"spec": map[string]any{
			"replicas": int64(1),
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}},
			},
		},
	}}
	cos := builders.COS("e2e-helm", builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		builders.WithPhase("config", builders.Inline(builders.ConfigMap(workloadNamespace, "kept", map[string]string{"k": "v"}))),
		builders.WithPhase("workload", builders.Inline(d)))
	e2e.RunEverywhere(c, cos)
	if err := c.client.Create(ctx, cos); err != nil {
		t.Fatalf("creating through the webhooks: %v", err)
	}
	if cos.Spec.Phases[0].Objects[0].Ref.Name == "" {
		t.Fatal("the stored ClusterObjectSet holds no ref: the mutating webhook did not externalize it")
	}
	framework.Eventually(ctx, t, "the ClusterObjectSet to succeed", func(ctx context.Context) (bool, string) {
		got := &olmv1.ClusterObjectSet{}
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(cos), got); err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, olmv1.ConditionSucceeded), fmt.Sprint(got.Status.Conditions)
	})
	return cos
}

// jobWatch records what a watch saw of one Job.
type jobWatch struct {
	c    *cluster
	name string
	w    watch.Interface
}

// watchJob starts watching the Jobs of the manager's namespace, before the hook can exist.
func (c *cluster) watchJob(t *testing.T, name string) *jobWatch {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.BatchV1().Jobs(c.Namespace()).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.BatchV1().Jobs(c.Namespace()).Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &jobWatch{c: c, name: name, w: w}
}

// waitCompleted reads the watch until the Job was seen Complete (and then deleted, as its
// hook-delete-policy says), and fails if it was seen Failed or the watch ends first.
func (j *jobWatch) waitCompleted(t *testing.T) {
	t.Helper()
	ctx := framework.Within(t, framework.Timeout)
	var complete, deleted bool
	var states []string
	for !complete || !deleted {
		select {
		case <-ctx.Done():
			t.Fatalf("the uninstall hook's Job %s: complete %v, deleted %v after %s; seen: %v", j.name, complete, deleted, framework.Timeout, states)
		case ev, ok := <-j.w.ResultChan():
			if !ok {
				t.Fatalf("the watch of Jobs ended; seen of %s: %v", j.name, states)
			}
			job, isJob := ev.Object.(*batchv1.Job)
			if !isJob || job.Name != j.name {
				continue
			}
			for _, cond := range job.Status.Conditions {
				if cond.Status != corev1.ConditionTrue {
					continue
				}
				switch cond.Type {
				case batchv1.JobComplete:
					complete = true
				case batchv1.JobFailed:
					t.Fatalf("the uninstall hook's Job %s failed: %s", j.name, cond.Message)
				}
			}
			deleted = deleted || ev.Type == watch.Deleted
			states = append(states, fmt.Sprintf("%s(succeeded %d)", ev.Type, job.Status.Succeeded))
		}
	}
	j.c.Logf("the uninstall hook's Job %s: %s", j.name, strings.Join(states, ", "))
}

// workloadStays: after the uninstall, the ClusterObjectSet is there without our finalizer and not
// being deleted, the manager and the webhook configurations are gone, and the Deployment it installed
// is available.
func (c *cluster) workloadStays(t *testing.T, cos *olmv1.ClusterObjectSet) {
	t.Helper()
	ctx := context.Background()
	got := &olmv1.ClusterObjectSet{}
	if err := c.client.Get(ctx, client.ObjectKeyFromObject(cos), got); err != nil {
		t.Fatalf("the ClusterObjectSet after helm uninstall: %v", err)
	}
	if got.DeletionTimestamp != nil || slices.Contains(got.Finalizers, teardownFinalizer) {
		t.Fatalf("the ClusterObjectSet after helm uninstall: deleting %v, finalizers %v; want it kept, %s released", got.DeletionTimestamp != nil, got.Finalizers, teardownFinalizer)
	}
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace(), Name: deployment}},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": map[string]any{"name": deployment}}},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": map[string]any{"name": deployment}}},
	} {
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after helm uninstall: %v, want it gone", obj, obj.GetName(), err)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: workloadNamespace, Name: "kept"}, cm); err != nil || cm.DeletionTimestamp != nil {
		t.Errorf("the ConfigMap the ClusterObjectSet installed: %v, deleting %v; want it kept", err, cm.DeletionTimestamp != nil)
	}
	d := &appsv1.Deployment{}
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: workloadNamespace, Name: "kept"}, d); err != nil || d.DeletionTimestamp != nil || d.Status.AvailableReplicas != 1 {
		t.Errorf("the Deployment the ClusterObjectSet installed: %v, deleting %v, available %d; want it kept and available", err, d.DeletionTimestamp != nil, d.Status.AvailableReplicas)
	}
}

// A leftover is an object helm uninstall did not delete.
type leftover struct {
	gvr    schema.GroupVersionResource
	name   string
	labels map[string]string
}

func (l leftover) String() string { return l.gvr.Resource + "/" + l.name }

// documented says which line of docs/install.md's "What helm uninstall leaves" (and the notes')
// covers a leftover in the release's namespace, or "".
func documented(l leftover) string {
	switch {
	case l.gvr.Resource == "secrets" && l.labels[objectDataLabel] != "":
		return "object-data Secrets"
	case l.gvr.Resource == "secrets" && l.labels[quarantineLabel] == "true":
		return "the sweep's quarantine copies"
	case l.gvr.Resource == "configmaps" && l.name == sweepConfigMap:
		return "the sweep's ConfigMap"
	case l.gvr.Resource == "leases" && l.name == leaderLease:
		return "the leader Lease"
	case l.gvr.Resource == "secrets" && (l.name == caSecret || l.name == servingSecret):
		return "cert-manager's CA and serving-certificate Secrets"
	case l.gvr.Resource == "configmaps" && l.name == clientCAConfigMap:
		return "the client CA's ConfigMap"
	}
	return everyNamespaces(l)
}

// everyNamespaces says whether every namespace holds the leftover (Kubernetes makes them).
func everyNamespaces(l leftover) string {
	if (l.gvr.Resource == "configmaps" && l.name == "kube-root-ca.crt") || (l.gvr.Resource == "serviceaccounts" && l.name == "default") {
		return "every namespace's"
	}
	return ""
}

// onlyDocumentedLeft waits until the release's namespace holds only what the docs list (the garbage
// collector deletes the ReplicaSets, Pods and EndpointSlices after their owners), checks that each
// documented item that must be there is, and that no object of the release is left anywhere but the
// CRD, still marked as the release's.
func (c *cluster) onlyDocumentedLeft(t *testing.T) {
	t.Helper()
	var found map[string][]string
	framework.Eventually(context.Background(), t, "only what the docs list to be left in "+helmNamespace, func(ctx context.Context) (bool, string) {
		left, err := c.namespaceObjects(ctx, helmNamespace)
		if err != nil {
			return false, err.Error()
		}
		found = map[string][]string{}
		var extra []string
		for _, l := range left {
			if what := documented(l); what != "" {
				found[what] = append(found[what], l.String())
			} else {
				extra = append(extra, l.String())
			}
		}
		return len(extra) == 0, fmt.Sprintf("not in the docs: %v", extra)
	})
	for _, want := range []string{"object-data Secrets", "the leader Lease", "cert-manager's CA and serving-certificate Secrets"} {
		if len(found[want]) == 0 {
			t.Errorf("the docs list %s as left, but none is", want)
		}
	}
	if c.auth != nil && len(found["the client CA's ConfigMap"]) == 0 {
		t.Error("the client CA's ConfigMap is gone: helm uninstall should not delete what it did not install")
	}
	c.Logf("left in %s after helm uninstall, each listed in docs/install.md: %v", helmNamespace, found)

	released, err := c.releaseObjects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(released) != 1 || released[0] != "customresourcedefinitions/"+crdName {
		t.Errorf("objects of release %s after helm uninstall: %v; want the CRD alone", helmRelease, released)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.client.Get(context.Background(), client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Annotations["meta.helm.sh/release-name"] != helmRelease || crd.Annotations["meta.helm.sh/release-namespace"] != helmNamespace {
		t.Errorf("the CRD's annotations %v: the docs say it stays marked as release %s/%s", crd.Annotations, helmNamespace, helmRelease)
	}
	if err := c.client.Get(context.Background(), client.ObjectKey{Name: helmNamespace}, &corev1.Namespace{}); err != nil {
		t.Errorf("namespace %s after helm uninstall: %v; the docs say it stays", helmNamespace, err)
	}
}

// onlyEveryNamespacesLeft waits until the release's namespace holds only what every namespace holds.
func (c *cluster) onlyEveryNamespacesLeft(t *testing.T) {
	t.Helper()
	framework.Eventually(context.Background(), t, "only what every namespace holds in "+helmNamespace, func(ctx context.Context) (bool, string) {
		left, err := c.namespaceObjects(ctx, helmNamespace)
		if err != nil {
			return false, err.Error()
		}
		var extra []string
		for _, l := range left {
			if everyNamespaces(l) == "" {
				extra = append(extra, l.String())
			}
		}
		return len(extra) == 0, fmt.Sprintf("left after the notes' commands: %v", extra)
	})
}

// namespaceObjects lists every object of every listable namespaced type in ns, but Events.
func (c *cluster) namespaceObjects(ctx context.Context, ns string) ([]leftover, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.quiet())
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return c.listAll(ctx, lists, ns, "")
}

// releaseObjects names every object, of any type in any namespace, that carries the release's
// instance label.
func (c *cluster) releaseObjects(ctx context.Context) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.quiet())
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	left, err := c.listAll(ctx, lists, metav1.NamespaceAll, "app.kubernetes.io/instance="+helmRelease)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(left))
	for i, l := range left {
		out[i] = l.String()
	}
	return out, nil
}

func (c *cluster) listAll(ctx context.Context, lists []*metav1.APIResourceList, ns, selector string) ([]leftover, error) {
	dyn, err := dynamic.NewForConfig(c.quiet())
	if err != nil {
		return nil, err
	}
	var out []leftover
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "list") || r.Name == "events" || strings.Contains(r.Name, "/") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			var items *unstructured.UnstructuredList
			if r.Namespaced {
				items, err = dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			} else {
				items, err = dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", gvr, err)
			}
			for _, item := range items.Items {
				out = append(out, leftover{gvr: gvr, name: item.GetName(), labels: item.GetLabels()})
			}
		}
	}
	return out, nil
}

// quiet is the admin config without the API server's warnings, which listing every type draws
// (deprecated Endpoints and ComponentStatus).
func (c *cluster) quiet() *rest.Config {
	cfg := rest.CopyConfig(c.cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	return cfg
}

// cleanUpHelm leaves the cluster as the case found it, whatever step failed: the release uninstalled
// without its hook, our finalizer released from every ClusterObjectSet, which are then deleted
// without deleting what they installed, the CRD and the case's namespaces deleted.
func (c *cluster) cleanUpHelm(h helmRunner) {
	ctx := context.Background()
	if out, err := h.output("uninstall", helmRelease, "--namespace", helmNamespace, "--no-hooks", "--wait", "--ignore-not-found"); err != nil {
		c.Logf("cleanup: helm uninstall: %v\n%s", err, out)
	}
	list := &olmv1.ClusterObjectSetList{}
	if err := c.client.List(ctx, list); err == nil {
		for i := range list.Items {
			cos := &list.Items[i]
			if len(cos.Finalizers) > 0 {
				cos.Finalizers = nil
				_ = c.client.Update(ctx, cos)
			}
			_ = c.client.Delete(ctx, cos, client.PropagationPolicy(metav1.DeletePropagationOrphan))
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}}
	if err := c.client.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
		c.Logf("cleanup: %v", err)
	}
	framework.WaitGone(ctx, c.t, c.client, crd)
	for _, ns := range []string{helmNamespace, strangerNamespace, monitoringNamespace, workloadNamespace} {
		framework.WaitGone(ctx, c.t, c.client, deleted(ctx, c.client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
}

// deleted deletes obj (gone already is fine) and returns it.
func deleted(ctx context.Context, cl client.Client, obj client.Object) client.Object {
	_ = cl.Delete(ctx, obj)
	return obj
}
