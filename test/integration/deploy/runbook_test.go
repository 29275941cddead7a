package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// asPlugin, set in the environment, makes this test binary kubectl cos: the runbook's commands find
// it on PATH as kubectl-cos, so the plugin they run is this tree's, without a build of its own.
const asPlugin = "COS_TEST_AS_KUBECTL_COS"

func init() {
	if os.Getenv(asPlugin) == "" {
		return
	}
	cmd := commands.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	cmd.SetArgs(os.Args[1:])
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		if e, ok := err.(*commands.ExitError); ok {
			os.Exit(e.Code)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runbookBlock is one fenced shell block of docs/runbook.md: its commands, the tag after the
// language (empty: reads only; writes; break-glass; setup, which sets the shell variables the others
// use) and the line it starts on.
type runbookBlock struct {
	tag, script string
	line        int
}

// fence opens a shell block: ```sh, then an optional tag.
var fence = regexp.MustCompile("^\\s*```sh(?: (writes|break-glass|setup))?\\s*$")

// runbookBlocks reads the fenced shell blocks of docs/runbook.md; any other fenced block fails the
// test (a command in it would not be run).
func runbookBlocks(t *testing.T) []runbookBlock {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var blocks []runbookBlock
	var cur *runbookBlock
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.script += trimmed + "\n"
		case strings.HasPrefix(trimmed, "```"):
			m := fence.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("docs/runbook.md:%d: %q: every fenced block is ```sh, optionally tagged writes, break-glass or setup", n, trimmed)
			}
			cur = &runbookBlock{tag: m[1], line: n}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("docs/runbook.md:%d: the block is not closed", cur.line)
	}
	return blocks
}

// kubeletLogs is the API server's answer to `kubectl logs` of a pod on kwok's node in namespace ns,
// which has no kubelet to serve them: the pod was found and its node asked (a pod that is not there
// is NotFound).
func kubeletLogs(ns string) *regexp.Regexp {
	return regexp.MustCompile(`/containerLogs/` + regexp.QuoteMeta(ns) + `/[a-z0-9.-]+/`)
}

// helmNamespace is where TestRunbookCommands installs the chart: the README's namespace.
const helmNamespace = "cos-system"

// TestRunbookCommands runs every command of docs/runbook.md, as on-call would paste it into one
// shell (the setup block first, which finds the install's namespace), against two installs on the
// local control plane: config/default in olmv1-system (its Deployment on kwok's node, RBAC, Services,
// quota and cert-manager's Certificate and Issuer applied), and the chart installed by helm, as the
// README says, into cos-system (cert-manager mode, the CRD left out: the control plane has it). For
// each, the manager runs in this process with leader election in that namespace, its webhooks
// installed; a pod of kwok's node under this host's name stands for the leader's (a pod's hostname
// is its name, the Lease holds the hostname). First the blocks that only read, in order; then the
// ones that write; then, with the manager stopped (the alert CosExternalizerDown), the break-glass
// ones, after which the webhook configurations and the Deployment are gone. Every block must
// succeed; `kubectl logs` is the one command that cannot, as kwok's node serves no logs: a block may
// fail only with the API server's attempt to fetch them.
func TestRunbookCommands(t *testing.T) {
	ctx := context.Background()
	blocks := runbookBlocks(t)
	tags := map[string]int{}
	for _, b := range blocks {
		tags[b.tag]++
	}
	if tags[""] == 0 || tags["break-glass"] == 0 || tags["setup"] != 1 || blocks[0].tag != "setup" {
		t.Fatalf("docs/runbook.md: %v blocks by tag, want reads and break-glass, and one setup block first", tags)
	}
	for _, dir := range certManagerCRDs(t) {
		if _, err := controlplane.InstallCRDs(ctx, testenv.Env.Config, dir); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("config/default in "+systemNamespace, func(t *testing.T) {
		applySystemNamespace(t)
		runRunbook(t, blocks, systemNamespace, applyManager(t, "default", "Certificate", "Issuer", "ResourceQuota"))
	})
	t.Run("helm in "+helmNamespace, func(t *testing.T) {
		runRunbook(t, blocks, helmNamespace, helmInstall(t, helmNamespace))
	})
}

// runRunbook runs the blocks against the install in namespace ns (its objects installed).
func runRunbook(t *testing.T, blocks []runbookBlock, ns string, installed []*unstructured.Unstructured) {
	ctx := context.Background()
	c := testenv.Env.Client
	m, err := testenv.Env.StartManager(ctx, "--leader-elect", "--rollout=true", "--system-namespace="+ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Stop()
		if err := testenv.Env.RemoveWebhooks(context.Background()); err != nil {
			t.Error(err)
		}
	})
	leaderPod(t, ns, installed)
	framework.Eventually(ctx, t, "the manager holding the Lease in "+ns, func(ctx context.Context) (bool, string) {
		lease := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: leaseName}, lease); err != nil {
			return false, err.Error()
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		return holder != "", "holder " + holder
	})

	dir := t.TempDir()
	kubectl, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"kubectl": kubectl, "kubectl-cos": self} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	setup := blocks[0]
	logsFetched := kubeletLogs(ns)
	run := func(b runbookBlock) {
		t.Helper()
		// As pasted into the shell the setup block ran in.
		script := b.script
		if b.tag != "setup" {
			script = setup.script + script
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+testenv.Env.Kubeconfig, asPlugin+"=1",
			"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		t.Logf("docs/runbook.md:%d (%s):\n%s\nstdout:\n%.2000s\nstderr:\n%.2000s", b.line, b.tag, b.script, stdout.String(), stderr.String())
		if err != nil && !logsFetched.MatchString(stderr.String()) {
			t.Errorf("docs/runbook.md:%d: %v:\n%s", b.line, err, stderr.String())
		}
		if b.tag == "setup" && !strings.Contains(stdout.String(), "the install's namespace: "+ns+"\n") {
			t.Errorf("docs/runbook.md:%d: the setup block found another namespace than %s:\n%s", b.line, ns, stdout.String())
		}
	}
	for _, tag := range []string{"setup", "", "writes"} {
		for _, b := range blocks {
			if b.tag == tag {
				run(b)
			}
		}
	}

	// The manager down: its webhooks fail closed; the break-glass blocks stop that.
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if b.tag == "break-glass" {
			run(b)
		}
	}
	for _, o := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cos-externalizer"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cos-externalizer"}},
		find(installed, "Deployment", deploymentName),
	} {
		framework.WaitGone(ctx, t, c, o)
	}
}

// helmInstall installs the chart as the README says, into namespace ns (created), in cert-manager
// mode, without the CRD (the control plane's, not the release's); the uninstall (without its hook,
// which needs a kubelet) and the namespace's deletion come when the test ends. It returns the
// release's objects.
func helmInstall(t *testing.T, ns string) []*unstructured.Unstructured {
	t.Helper()
	bin, err := controlplane.Binary("helm")
	if err != nil {
		t.Fatalf("%v (make helm)", err)
	}
	helm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + testenv.Env.Kubeconfig}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm("install", "cos-externalizer", filepath.Join(root, "charts", "cos-externalizer"), "--namespace", ns, "--create-namespace",
		"--set", "crds.enabled=false")
	t.Cleanup(func() {
		helm("uninstall", "cos-externalizer", "--namespace", ns, "--wait", "--no-hooks")
		framework.Delete(context.Background(), t, testenv.Env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return parse(t, []byte(helm("get", "manifest", "cos-externalizer", "--namespace", ns)))
}

// leaderPod creates in namespace ns, on kwok's node, a pod of the installed Deployment's template
// named after this host (where the manager of the test runs, and so the Lease's holder), outside the Deployment's
// selector; it is deleted when the test ends.
func leaderPod(t *testing.T, ns string, installed []*unstructured.Unstructured) {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	deploy := &appsv1.Deployment{}
	convert(t, find(installed, "Deployment", deploymentName), deploy)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(host)},
		Spec:       deploy.Spec.Template.Spec,
	}
	pod.Spec.NodeName = controlplane.NodeName
	if err := testenv.Env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := testenv.Env.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
		framework.WaitGone(ctx, t, testenv.Env.Client, pod)
	})
	framework.Eventually(context.Background(), t, "the leader's pod running", func(ctx context.Context) (bool, string) {
		got := &corev1.Pod{}
		if err := testenv.Env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == corev1.PodRunning, string(got.Status.Phase)
	})
}
