package controlplane_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
)

// TestControlPlane starts a control plane of its own and checks what the other tests rely on:
// the garbage collector, the scheduler and kwok making a Deployment Available, and a clean stop.
func TestControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = cp.Stop()
		}
	}()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := cs.Discovery().ServerVersion(); err != nil || v.GitVersion == "v0.0.0-master" {
		t.Fatalf("server version %v, %v: want a real release version", v, err)
	}

	t.Run("garbage collector deletes a child of a deleted owner", func(t *testing.T) {
		owner, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:            "child",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(ctx, t, "child to be garbage collected", func(ctx context.Context) (bool, string) {
			_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "child", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
		})
	})

	t.Run("a Deployment becomes Available on the fake node", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		_, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web:1"}}},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(ctx, t, "Deployment web to be Available", func(ctx context.Context) (bool, string) {
			d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			seen := fmt.Sprintf("%d available, conditions %v", d.Status.AvailableReplicas, d.Status.Conditions)
			for _, c := range d.Status.Conditions {
				if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
					return d.Status.AvailableReplicas == 2, seen
				}
			}
			return false, seen
		})
	})

	pids := cp.PIDs()
	dir := cp.Dir
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	for name, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("%s (pid %d) still running after Stop", name, pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s not removed: %v", dir, err)
	}
}

// TestComponentsDieWithTheirParent starts a control plane in a child process (this test binary,
// re-executed), kills the child with SIGKILL, as a crashed or timed-out test run would be, and checks
// that no component outlives it.
func TestComponentsDieWithTheirParent(t *testing.T) {
	if os.Getenv("COS_CONTROLPLANE_CHILD") == "1" {
		return // the child's part runs in TestHelperChild
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperChild$", "-test.v")
			cmd.Env = append(os.Environ(), "COS_CONTROLPLANE_CHILD=1")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(sc.Text(), "PIDS "); ok {
					for _, f := range strings.Fields(rest) {
						pid, _ := strconv.Atoi(f)
						pids = append(pids, pid)
					}
					break
				}
			}
			if len(pids) != 5 {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("child reported pids %v, want 5", pids)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, out) }()
			_ = cmd.Wait()
			t.Cleanup(func() { // a failed wait leaves no component behind
				for _, pid := range pids {
					if alive(pid) {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			framework.Eventually(context.Background(), t, "the components to die with their parent", func(context.Context) (bool, string) {
				var left []int
				for _, pid := range pids {
					if alive(pid) {
						left = append(left, pid)
					}
				}
				return len(left) == 0, fmt.Sprintf("pids %v outlived their parent", left)
			})
		})
	}
}

// TestHelperChild is the child of TestComponentsDieWithTheirParent; it does nothing otherwise.
func TestHelperChild(t *testing.T) {
	if os.Getenv("COS_CONTROLPLANE_CHILD") != "1" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	var ids []string
	for _, pid := range cp.PIDs() {
		ids = append(ids, strconv.Itoa(pid))
	}
	fmt.Println("PIDS " + strings.Join(ids, " "))
	<-ctx.Done()
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}
