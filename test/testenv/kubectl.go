package testenv

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// Kubectl runs the kubectl built with the control plane against Env's cluster, with stdin when it
// is not nil.
func Kubectl(t testing.TB, stdin []byte, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return Env.Kubectl(t, stdin, args...)
}

// Kubectl runs the kubectl built with the control plane against e's cluster, with stdin when it is
// not nil.
func (e *Environment) Kubectl(t testing.TB, stdin []byte, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
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

// WriteJSON writes obj as JSON into file name of a temporary folder, for kubectl -f, as a person
// would write it: without the zero creationTimestamp and empty status a Go struct serializes. It
// returns the file's path.
func WriteJSON(t testing.TB, obj any, name string) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
