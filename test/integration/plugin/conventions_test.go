package plugin_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// runBinary runs the built kubectl-cos against the test cluster and returns its exit status, as a
// CI step sees it.
func runBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(pluginBinaries(t), "kubectl-cos"), append([]string{"--kubeconfig=" + testenv.Env.Kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String()
}

// TestDiffExitStatus: the kubectl-cos binary's diff exits as kubectl diff does: 0 without
// differences, 1 with, 2 on errors (a ClusterObjectSet that is not there, a bad flag).
func TestDiffExitStatus(t *testing.T) {
	const name = "diff-exit"
	testenv.Env.RemoveWithSecretsAfter(t, name)
	stored := builders.COS(name, builders.WithLifecycleState(olmv1.LifecycleStateArchived),
		builders.WithPhase("configuration", builders.InlineConfigMaps("diff-exit", "cm", 2)...))
	file := writeFile(t, stored)
	mustPlugin(t, "apply", "-f", file)
	changed := stored.DeepCopy()
	changed.Spec.ProgressDeadlineMinutes = 30

	tests := map[string]struct {
		args []string
		want int
	}{
		"no differences":           {args: []string{"diff", "-f", file}, want: 0},
		"differences":              {args: []string{"diff", "-f", writeFile(t, changed)}, want: 1},
		"no such ClusterObjectSet": {args: []string{"diff", name, "diff-exit-nosuch"}, want: 2},
		"a bad flag":               {args: []string{"diff", "--nosuch", name, name}, want: 2},
	}
	for tn, tc := range tests {
		t.Run(tn, func(t *testing.T) {
			if got, out := runBinary(t, tc.args...); got != tc.want {
				t.Errorf("kubectl-cos %s: exit status %d, want %d\n%s", strings.Join(tc.args, " "), got, tc.want, out)
			}
		})
	}
}

// TestCheckJSON: check -o json prints the findings as data; with the manager running every one
// passes, and the API and dry-run checks are among them.
func TestCheckJSON(t *testing.T) {
	r := plugin(t, "check", "-o", "json")
	if r.err != nil {
		t.Fatalf("check -o json: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
	var report commands.CheckReport
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&report); err != nil {
		t.Fatalf("not the documented JSON: %v\n%s", err, r.stdout)
	}
	if !report.Passed {
		t.Errorf("passed is false with the manager running:\n%s", r.stdout)
	}
	var checks []string
	for _, f := range report.Findings {
		if f.Result != "ok" && f.Result != "warn" {
			t.Errorf("finding %+v: want ok or warn", f)
		}
		if f.Message == "" {
			t.Errorf("finding %+v without a message", f)
		}
		checks = append(checks, f.Check+"="+f.Result)
	}
	for _, want := range []string{"api=ok", "ca-bundle=ok", "dry-run=ok"} {
		if !slices.Contains(checks, want) {
			t.Errorf("findings %v lack %s", checks, want)
		}
	}
	if strings.Contains(r.stdout, "[ok]") {
		t.Errorf("-o json printed the text report too:\n%s", r.stdout)
	}
}

// TestApplyServerDryRunWarnings: a server-side dry run of a ClusterObjectSet of many objects prints
// no warning per object about the Secrets it did not write, and still prints a warning about a ref
// of the file's own.
func TestApplyServerDryRunWarnings(t *testing.T) {
	const name = "dry-warnings"
	// 51 objects, as the bundle that printed 51 warnings, in two phases (at most 50 each).
	objs := builders.InlineConfigMaps("dry-warnings", "cm", 51)
	file := writeFile(t, builders.COS(name, builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		builders.WithPhase("configuration", objs[:40]...),
		builders.WithPhase("deploy", append(objs[40:], builders.Ref("dry-warnings-mine", "", "nosuchkey"))...)))
	r := mustPlugin(t, "apply", "-f", file, "--dry-run=server")
	if cosExists(t, name) {
		t.Fatal("a dry run created the ClusterObjectSet")
	}
	var warnings []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, "Warning:") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "Secret "+testenv.SystemNamespace+"/dry-warnings-mine does not exist (yet)") {
		t.Errorf("warnings %q, want one, about the file's own ref\nstderr: %s", warnings, r.stderr)
	}
	if !strings.Contains(r.stderr, "nothing written") {
		t.Errorf("no summary saying nothing was written:\n%s", r.stderr)
	}
}
