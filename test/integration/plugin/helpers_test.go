// Package plugin_test drives kubectl cos against a real API server with the manager (webhooks and
// reconciler) running in this process: the plugin's commands run in the process too (cos.NewCommand),
// except where kubectl itself must find the plugin's binaries.
//
// A test that neither stops the manager nor shares cluster objects with another may call t.Parallel:
// the testing package runs those once every other test has ended, so they never overlap a test that
// stops the manager or sweeps the system namespace, and their waits (a rollout, the API server's
// teardown of CRDs, a build) overlap one another's. One of them at most writes to the cluster
// (TestBuildExternalizeEqualsTheWebhook, whose CRDs come and go): TestTenMegabyteBundleRollsOut,
// run beside it under heavy load, did not see its own teardown (a Namespace and 200 ConfigMaps)
// end within the wait's 3 minutes, and stays serial.
package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

var ctx = context.Background()

func c() client.Client { return testenv.Env.Client }

// result is what one run of kubectl cos printed and returned.
type result struct {
	stdout, stderr string
	err            error
}

// plugin runs kubectl cos in the process against the test cluster, with hooks.
func pluginWith(t testing.TB, hooks commands.Hooks, stdin []byte, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: bytes.NewReader(stdin), Out: &out, ErrOut: &errOut}
	cmd := commands.NewCommandWithHooks(streams, hooks)
	cmd.SetArgs(append([]string{"--kubeconfig=" + testenv.Env.Kubeconfig}, args...))
	err := cmd.ExecuteContext(ctx)
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

func plugin(t testing.TB, args ...string) result {
	t.Helper()
	return pluginWith(t, commands.Hooks{}, nil, args...)
}

// mustPlugin runs kubectl cos and fails the test on error.
func mustPlugin(t testing.TB, args ...string) result {
	t.Helper()
	r := plugin(t, args...)
	if r.err != nil {
		t.Fatalf("kubectl cos %s: %v\nstdout: %.3000s\nstderr: %.3000s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// pluginBinaries builds kubectl-cos and kubectl_complete-cos once per test binary, into a folder to
// put on PATH.
func pluginBinaries(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		root, err := controlplane.RepoRoot()
		if err != nil {
			binErr = err
			return
		}
		binDir, binErr = os.MkdirTemp("", "kubectl-cos-bin-")
		if binErr != nil {
			return
		}
		for _, pkg := range []string{"kubectl-cos", "kubectl_complete-cos"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, pkg), "./cmd/"+pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				binErr = fmt.Errorf("building %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// kubectlWithPlugin runs the control plane's kubectl with the plugin's binaries on PATH.
func kubectlWithPlugin(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	dir := pluginBinaries(t)
	bin, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+testenv.Env.Kubeconfig, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// writeFile writes obj as a JSON file for kubectl -f (testenv.WriteJSON).
func writeFile(t testing.TB, obj any) string { return testenv.WriteJSON(t, obj, "cos.json") }

// writeText writes a file of the given name and content into dir.
func writeText(t testing.TB, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// decodeCOS reads a ClusterObjectSet printed as YAML or JSON, integers as int64.
func decodeCOS(t testing.TB, text string) *olmv1.ClusterObjectSet {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	out := &olmv1.ClusterObjectSet{}
	b, _ := json.Marshal(m)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	// encoding/json gives the inline objects float64 numbers: take them from the int64 map instead.
	phases, _ := m["spec"].(map[string]any)["phases"].([]any)
	for i, p := range phases {
		objs, _ := p.(map[string]any)["objects"].([]any)
		for j, o := range objs {
			if obj, ok := o.(map[string]any)["object"].(map[string]any); ok {
				out.Spec.Phases[i].Objects[j].Object.Object = obj
			}
		}
	}
	return out
}

func getCOS(t testing.TB, name string) *olmv1.ClusterObjectSet {
	t.Helper()
	got := &olmv1.ClusterObjectSet{}
	if err := c().Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatalf("getting ClusterObjectSet %s: %v", name, err)
	}
	return got
}

func cosExists(t testing.TB, name string) bool {
	t.Helper()
	err := c().Get(ctx, client.ObjectKey{Name: name}, &olmv1.ClusterObjectSet{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}
