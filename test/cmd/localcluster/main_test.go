package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// upInTemp runs `localcluster up` with its state in a folder of the test's, not from KUBECONFIG, and
// returns the folder.
func upInTemp(t *testing.T) string {
	t.Helper()
	local := t.TempDir()
	t.Setenv("COS_LOCAL_DIR", local)
	t.Setenv("KUBECONFIG", "")
	if err := up(); err != nil {
		t.Fatal(err)
	}
	return local
}

// TestUpDown runs `localcluster up` and `down` as people do: up leaves a detached control plane with
// a kubeconfig and the CRD installed; down stops every component and removes the state.
func TestUpDown(t *testing.T) {
	local := upInTemp(t)
	st, err := readState(filepath.Join(local, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for name, pid := range st.PIDs {
			if isOurs(pid, name) {
				t.Errorf("%s (pid %d) still running", name, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}()
	if len(st.PIDs) != 5 {
		t.Fatalf("state has pids %v, want 5 components", st.PIDs)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(local, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Get(t.Context(), controlplane.NodeName, metav1.GetOptions{}); err != nil {
		t.Errorf("fake node: %v", err)
	}
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("olm.operatorframework.io/v1"); err != nil {
		t.Errorf("CRD not served: %v", err)
	}
	// A second up finds it running and starts nothing.
	if err := up(); err != nil {
		t.Fatal(err)
	}
	if err := down(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"cluster.json", "kubeconfig", "cluster"} {
		if _, err := os.Stat(filepath.Join(local, p)); !os.IsNotExist(err) {
			t.Errorf("%s left behind after down", p)
		}
	}
}

// TestMakeRunAgainstKubeconfig runs `make run` as a person does with KUBECONFIG pointing at a
// cluster (here one `up` started): the manager starts against it with its webhooks off, and says so
// and what it runs, until interrupted.
func TestMakeRunAgainstKubeconfig(t *testing.T) {
	local := upInTemp(t)
	defer func() {
		if err := down(); err != nil {
			t.Error(err)
		}
	}()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "run", "ARGS=--log-format=console")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(local, "kubeconfig"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); _ = w.Close() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Logf("make run exited on SIGINT: %v", err)
			}
		case <-time.After(time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Error("make run did not stop on SIGINT")
		}
	}()

	// What a person reads: why the webhooks are off, the command run, and the manager's own line
	// with its decisions (the build may take a while on a loaded machine).
	want := []string{"with its webhooks off", "--enable-webhooks=false", "starting manager"}
	seen := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var log strings.Builder
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if missing(log.String(), want) == nil {
				seen <- log.String()
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		seen <- log.String()
	}()
	select {
	case log := <-seen:
		if m := missing(log, want); m != nil {
			t.Fatalf("make run said %q, missing %q", log, m)
		}
		for _, s := range []string{`"rollout": true`, `"webhooks": false`} {
			if !strings.Contains(log, s) {
				t.Errorf("the manager's start line does not say %s:\n%s", s, log)
			}
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("make run did not start the manager within 5 minutes")
	}
}

func missing(log string, want []string) []string {
	var out []string
	for _, w := range want {
		if !strings.Contains(log, w) {
			out = append(out, w)
		}
	}
	return out
}
