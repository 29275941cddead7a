package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// TestUpDown runs `localcluster up` and `down` as people do: up leaves a detached control plane with
// a kubeconfig and the CRD installed; down stops every component and removes the state.
func TestUpDown(t *testing.T) {
	local := t.TempDir()
	t.Setenv("COS_LOCAL_DIR", local)
	t.Setenv("KUBECONFIG", "")
	if err := up(); err != nil {
		t.Fatal(err)
	}
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
