package plugin_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestKubectlPluginEdges runs the plugin through kubectl as krew installs it (kubectl-cos alone on
// PATH, and the link the manifest's caveats add): completion through the link, the version
// subcommand, and -v=6 logging client-go's requests as kubectl does.
func TestKubectlPluginEdges(t *testing.T) {
	t.Parallel() // it writes nothing to the cluster
	krewBin := t.TempDir()
	if err := os.Symlink(filepath.Join(pluginBinaries(t), "kubectl-cos"), filepath.Join(krewBin, "kubectl-cos")); err != nil {
		t.Fatal(err)
	}
	kubectl, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+testenv.Env.Kubeconfig, "PATH="+krewBin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	if out, _, _ := run("__complete", "cos", "ver"); strings.Contains(out, "version") {
		t.Errorf("completion without the link: %q", out)
	}
	// The caveats' command: ln -sf kubectl-cos "$KREW_ROOT/bin/kubectl_complete-cos".
	if err := os.Symlink("kubectl-cos", filepath.Join(krewBin, "kubectl_complete-cos")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args         []string
		stdout       []string
		stderr       []string
		stdoutAbsent string
	}{
		"completion through the link": {args: []string{"__complete", "cos", "ver"}, stdout: []string{"version\tPrint the plugin's version"}},
		"version":                     {args: []string{"cos", "version"}, stdout: []string{"Plugin Version: "}},
		"version -o json":             {args: []string{"cos", "version", "-o", "json"}, stdout: []string{`"pluginVersion": {`, `"goVersion": "go`}},
		"--version":                   {args: []string{"cos", "--version"}, stdout: []string{"kubectl cos version "}},
		"-v=6 logs the requests": {args: []string{"cos", "-v=6", "inspect", "edges-none"},
			stdout: []string{"Orphaned Secrets:"}, stderr: []string{"/apis/olm.operatorframework.io/v1/clusterobjectsets/edges-none", "404 Not Found"}},
		"no -v, no request log": {args: []string{"cos", "inspect", "edges-none"}, stdout: []string{"Orphaned Secrets:"}, stdoutAbsent: "404 Not Found"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, _ := run(tc.args...)
			for _, s := range tc.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%.2000s\nstderr: %.2000s", s, out, errOut)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%.3000s", s, errOut)
				}
			}
			if tc.stdoutAbsent != "" && strings.Contains(out+errOut, tc.stdoutAbsent) {
				t.Errorf("holds %q:\n%.2000s\n%.2000s", tc.stdoutAbsent, out, errOut)
			}
		})
	}
}

// TestRepeatedFilenamesAndKustomize: apply takes -f more than once, and size and diff read a
// kustomization (-k), as kubectl does.
func TestRepeatedFilenamesAndKustomize(t *testing.T) {
	const a, b = "edges-files-a", "edges-files-b"
	testenv.Env.RemoveWithSecretsAfter(t, a, b)
	fileA := writeFile(t, builders.COS(a, builders.WithPhase("configuration", builders.InlineConfigMaps("default", a, 2)...)))
	fileB := writeFile(t, builders.COS(b, builders.WithPhase("configuration", builders.InlineConfigMaps("default", b, 2)...)))
	r := mustPlugin(t, "apply", "-f", fileA, "-f", fileB, "--server-side")
	for _, s := range []string{"clusterobjectset.olm.operatorframework.io/" + a + " created", "clusterobjectset.olm.operatorframework.io/" + b + " created"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("apply -f -f lacks %q:\n%s", s, r.stdout)
		}
	}
	kdir := t.TempDir()
	data, err := os.ReadFile(fileA)
	if err != nil {
		t.Fatal(err)
	}
	writeText(t, kdir, "cos.json", string(data))
	writeText(t, kdir, "kustomization.yaml", "resources: [cos.json]\n")
	r = mustPlugin(t, "size", "-k", kdir)
	if !strings.Contains(r.stdout, "ClusterObjectSet "+a+": 2 objects in 1 phase") {
		t.Errorf("size -k:\n%s", r.stdout)
	}
	if r := plugin(t, "diff", "-k", kdir); r.err != nil || !strings.Contains(r.stderr, "0 changed, 0 added, 0 removed") {
		t.Errorf("diff -k: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
}
