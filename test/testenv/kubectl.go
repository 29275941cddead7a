package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// Kubectl runs the kubectl built with the control plane against Env's cluster, with stdin when it
// is not nil.
func Kubectl(t testing.TB, stdin []byte, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+Env.Kubeconfig)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// MustKubectl is Kubectl that fails the test on error.
func MustKubectl(t testing.TB, stdin []byte, args ...string) (string, string) {
	t.Helper()
	out, errOut, err := Kubectl(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout: %.3000s\nstderr: %.3000s", strings.Join(args, " "), err, out, errOut)
	}
	return out, errOut
}
