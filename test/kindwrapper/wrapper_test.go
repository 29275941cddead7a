// Package kindwrapper tests hack/kind/bin/docker, the wrapper that maps kind's --privileged where the
// machine refuses it (docs/e2e.md), against a stand-in docker that records its arguments.
package kindwrapper

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// privileged is what the wrapper passes instead of --privileged.
var privileged = []string{
	"--cap-add=ALL", "--cap-drop=SYS_RESOURCE",
	"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
	"--security-opt", "systempaths=unconfined",
	"--device-cgroup-rule=a *:* rwm", "--device=/dev/kmsg", "--cgroupns=private",
	"--volume", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
}

func wrapper(t *testing.T) string {
	t.Helper()
	// go test runs in the package's folder; runtime.Caller would name no folder under -trimpath (make's GOFLAGS).
	p, err := filepath.Abs(filepath.Join("..", "..", "hack", "kind", "bin", "docker"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWrapperMapsPrivileged: run and create get the narrow set for --privileged, exec drops it, and
// every other command and argument reaches docker unchanged.
func TestWrapperMapsPrivileged(t *testing.T) {
	tests := map[string]struct {
		args []string
		want []string
	}{
		"run privileged": {
			args: []string{"run", "--hostname", "n", "--privileged", "--tmpfs", "/tmp", "img"},
			want: append(append([]string{"run", "--hostname", "n"}, privileged...), "--tmpfs", "/tmp", "img"),
		},
		"create privileged=true": {
			args: []string{"create", "--privileged=true", "img"},
			want: append(append([]string{"create"}, privileged...), "img"),
		},
		"run unprivileged":  {args: []string{"run", "-d", "img"}, want: []string{"run", "-d", "img"}},
		"exec privileged":   {args: []string{"exec", "--privileged", "node", "cat", "/kind/version"}, want: []string{"exec", "node", "cat", "/kind/version"}},
		"other commands":    {args: []string{"ps", "-a", "--filter", "label=x"}, want: []string{"ps", "-a", "--filter", "label=x"}},
		"an argument alike": {args: []string{"inspect", "--format", "--privileged"}, want: []string{"inspect", "--format", "--privileged"}},
	}
	fake := t.TempDir()
	record := filepath.Join(fake, "args")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " + record + "\n"
	if err := os.WriteFile(filepath.Join(fake, "docker"), []byte(script), 0o755); err != nil { //nolint:gosec // an executable stand-in
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(wrapper(t), tc.args...)
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(wrapper(t))+":"+fake+":/usr/bin:/bin")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			b, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("docker got (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWrapperWithoutDocker: with no docker on PATH but itself, the wrapper says so and exits 127
// instead of calling itself.
func TestWrapperWithoutDocker(t *testing.T) {
	// A PATH with bash (the wrapper's interpreter) and no docker.
	bin := t.TempDir()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bash, filepath.Join(bin, "bash")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(wrapper(t), "version")
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(wrapper(t))+":"+bin)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 127 || !strings.Contains(string(out), "no docker on PATH") {
		t.Errorf("got %v: %s; want exit 127 naming the missing docker", err, out)
	}
}
