// Command localcluster runs the local control plane of package test/controlplane for people:
//
//	localcluster up              start it in the background; state and kubeconfig under .local/
//	localcluster down            stop what `up` started
//	localcluster run -- CMD ...  run CMD against $KUBECONFIG, or against a fresh local control plane
//	                             (with the CRDs installed) that stops when CMD exits
//
// `make cluster-up`, `make cluster-down` and `make run` call it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// state is what `up` leaves in .local/cluster.json for `down`.
type state struct {
	Dir        string         `json:"dir"`
	Kubeconfig string         `json:"kubeconfig"`
	PIDs       map[string]int `json:"pids"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up()
	case "down":
		err = down()
	case "run":
		args := os.Args[2:]
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		if len(args) == 0 {
			usage()
		}
		var code int
		code, err = run(args)
		if err == nil {
			os.Exit(code)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localcluster up | down | run -- COMMAND [ARGS...]")
	os.Exit(2)
}

// localDir is .local/ in the repository, or $COS_LOCAL_DIR.
func localDir() (string, error) {
	if d := os.Getenv("COS_LOCAL_DIR"); d != "" {
		return d, nil
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".local"), nil
}

func up() error {
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		fmt.Printf("KUBECONFIG is set (%s): using that cluster, nothing started.\n", kc)
		return nil
	}
	local, err := localDir()
	if err != nil {
		return err
	}
	statePath := filepath.Join(local, "cluster.json")
	if st, err := readState(statePath); err == nil && anyAlive(st) {
		fmt.Printf("already running.\nexport KUBECONFIG=%s\n", st.Kubeconfig)
		return nil
	}
	dir := filepath.Join(local, "cluster")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: dir, Detached: true, Log: os.Stderr})
	if err != nil {
		return err
	}
	if err := installCRDs(ctx, cp); err != nil {
		_ = cp.Stop()
		return err
	}
	kubeconfig := filepath.Join(local, "kubeconfig")
	if err := copyFile(cp.Kubeconfig, kubeconfig); err != nil {
		_ = cp.Stop()
		return err
	}
	b, _ := json.MarshalIndent(state{Dir: dir, Kubeconfig: kubeconfig, PIDs: cp.PIDs()}, "", "  ")
	if err := os.WriteFile(statePath, b, 0o600); err != nil {
		_ = cp.Stop()
		return err
	}
	fmt.Printf("local control plane running (logs in %s/logs); stop it with `make cluster-down`.\nexport KUBECONFIG=%s\n", dir, kubeconfig)
	return nil
}

func down() error {
	local, err := localDir()
	if err != nil {
		return err
	}
	statePath := filepath.Join(local, "cluster.json")
	st, err := readState(statePath)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("no local control plane is running.")
		return nil
	}
	if err != nil {
		return err
	}
	// Stop in reverse start order: kwok, scheduler, controller-manager, apiserver, etcd.
	for _, name := range []string{"kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		pid, ok := st.PIDs[name]
		if !ok || !isOurs(pid, name) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for isOurs(pid, name) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if isOurs(pid, name) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		fmt.Printf("stopped %s (pid %d)\n", name, pid)
	}
	if err := os.RemoveAll(st.Dir); err != nil {
		return err
	}
	_ = os.Remove(st.Kubeconfig)
	return os.Remove(statePath)
}

// run starts CMD against $KUBECONFIG or a fresh local control plane, forwarding SIGINT and SIGTERM,
// and tears the control plane down when CMD exits.
func run(args []string) (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := os.Environ()
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		fmt.Fprintf(os.Stderr, "localcluster: KUBECONFIG is set (%s): running against that cluster (install the CRD there with `kubectl apply -f config/crd/bases`).\n", kc)
	} else {
		local, err := localDir()
		if err != nil {
			return 0, err
		}
		cp, err := controlplane.Start(ctx, controlplane.Options{Log: os.Stderr})
		if err != nil {
			return 0, err
		}
		defer func() { _ = cp.Stop() }()
		if err := installCRDs(ctx, cp); err != nil {
			return 0, err
		}
		kubeconfig := filepath.Join(local, "kubeconfig")
		if err := copyFile(cp.Kubeconfig, kubeconfig); err != nil {
			return 0, err
		}
		defer func() { _ = os.Remove(kubeconfig) }()
		fmt.Fprintf(os.Stderr, "localcluster: local control plane ready; in another shell: export KUBECONFIG=%s\n", kubeconfig)
		env = append(env, "KUBECONFIG="+kubeconfig)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() {
		<-ctx.Done()
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

func installCRDs(ctx context.Context, cp *controlplane.ControlPlane) error {
	dir, err := controlplane.CRDDir()
	if err != nil {
		return err
	}
	names, err := controlplane.InstallCRDs(ctx, cp.Config, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "localcluster: installed CRDs %s\n", strings.Join(names, ", "))
	return nil
}

func readState(path string) (state, error) {
	var st state
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

func anyAlive(st state) bool {
	for name, pid := range st.PIDs {
		if isOurs(pid, name) {
			return true
		}
	}
	return false
}

// isOurs reports whether pid is alive and still runs the named component (pids are reused).
func isOurs(pid int, name string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := strings.Cut(string(b), "\x00")
	if filepath.Base(argv0) != name {
		return false
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	// A zombie (state Z) has exited.
	if err != nil {
		return false
	}
	if _, rest, ok := strings.Cut(string(st), ") "); ok && strings.HasPrefix(rest, "Z") {
		return false
	}
	return true
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}
