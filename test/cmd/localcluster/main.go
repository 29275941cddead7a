// Command localcluster runs the local control plane of package test/controlplane for people:
//
//	localcluster up              start it in the background; state and kubeconfig under .local/
//	localcluster down            stop what `up` started
//	localcluster run [--webhooks [--webhook-port=N]] -- MANAGER ...
//	                             run the manager against $KUBECONFIG with its webhooks off (a
//	                             cluster's API server cannot call a webhook on this machine), or
//	                             against a fresh local control plane (with the CRDs installed) that
//	                             stops when the manager exits, as the manager's ServiceAccount of
//	                             config/rbac (its RBAC applied, a token from a TokenRequest in
//	                             .local/kubeconfig-manager); there, with --webhooks, also a
//	                             serving certificate for 127.0.0.1, the webhook configurations
//	                             pointing at https://127.0.0.1:N (N free unless given), and the
//	                             matching --webhook-* flags. Metrics and probes get free loopback
//	                             ports unless the manager's flags name them, so that two runs can
//	                             share a machine.
//
// `make cluster-up`, `make cluster-down` and `make run` call it.
package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/certs"
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
		fs := flag.NewFlagSet("run", flag.ExitOnError)
		webhooks := fs.Bool("webhooks", false, "on a local control plane, serve the webhooks of config/webhook")
		webhookPort := fs.Int("webhook-port", 0, "loopback port of the webhooks; 0 picks a free one")
		_ = fs.Parse(os.Args[2:])
		args := fs.Args()
		if len(args) == 0 {
			usage()
		}
		var code int
		code, err = run(args, *webhooks, *webhookPort)
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
	fmt.Fprintln(os.Stderr, "usage: localcluster up | down | run [--webhooks [--webhook-port=N]] -- MANAGER [ARGS...]")
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

// run starts the manager against $KUBECONFIG or a fresh local control plane, forwarding SIGINT and
// SIGTERM, and tears the control plane down when the manager exits.
func run(args []string, webhooks bool, webhookPort int) (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := os.Environ()
	ports, err := loopbackPorts(args)
	if err != nil {
		return 0, err
	}
	args = append(args, ports...)
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		fmt.Fprintf(os.Stderr, "localcluster: KUBECONFIG is set (%s): running the manager against that cluster with its webhooks off "+
			"(--enable-webhooks=false): the cluster's API server cannot call a webhook served on this machine. `make deploy` installs "+
			"the webhooks in the cluster. The CRD must be installed there (`kubectl apply --server-side -k config/crd`); with the default "+
			"--rollout=auto the reconciler stays off where OLM's operator-controller rolls ClusterObjectSets out.\n", kc)
		if !hasFlag(args, "--enable-webhooks") {
			args = append(args, "--enable-webhooks=false")
		}
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
		// The manager runs as its ServiceAccount, with config/rbac's permissions: with the admin
		// kubeconfig, its Secret guard would exempt the person using that kubeconfig too.
		managerKubeconfig := filepath.Join(local, "kubeconfig-manager")
		expires, err := managerIdentity(ctx, cp, managerKubeconfig)
		if err != nil {
			return 0, err
		}
		defer func() { _ = os.Remove(managerKubeconfig) }()
		fmt.Fprintf(os.Stderr, "localcluster: the manager runs as %s with the RBAC of %s (token valid until %s); "+
			"the Secret guard exempts it, not you\n", managerUser, strings.Join(rbacOverlays, " and "), expires.UTC().Format(time.RFC3339))
		if webhooks {
			if webhookPort == 0 {
				free, err := controlplane.FreePorts(1)
				if err != nil {
					return 0, err
				}
				webhookPort = free[0]
			}
			webhookArgs, err := setupWebhooks(ctx, cp, local, webhookPort)
			if err != nil {
				return 0, err
			}
			args = append(args, webhookArgs...)
		}
		fmt.Fprintf(os.Stderr, "localcluster: local control plane ready; in another shell: export KUBECONFIG=%s\n", kubeconfig)
		env = append(env, "KUBECONFIG="+managerKubeconfig)
	}
	fmt.Fprintf(os.Stderr, "localcluster: running %s\n", strings.Join(args, " "))
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
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// setupWebhooks writes a serving certificate for 127.0.0.1 under local, creates the system
// namespace, installs the webhook configurations pointing at the port, and returns the manager flags
// that serve them, authenticating the API server by its webhook client certificate.
func setupWebhooks(ctx context.Context, cp *controlplane.ControlPlane, local string, port int) ([]string, error) {
	dir := filepath.Join(local, "webhook-certs")
	bundle, err := servingBundle([]string{"127.0.0.1", "localhost"}, 365*24*time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	if err := bundle.Write(dir); err != nil {
		return nil, err
	}
	if err := controlplane.EnsureNamespace(ctx, cp.Config, olmv1.DefaultSystemNamespace); err != nil {
		return nil, err
	}
	manifests, err := controlplane.WebhookManifests()
	if err != nil {
		return nil, err
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	if err := controlplane.InstallWebhooks(ctx, cp.Config, manifests, url, bundle.CA); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "localcluster: webhooks installed, pointing at %s\n", url)
	flags := []string{"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(port), "--webhook-cert-dir=" + dir}
	if cp.WebhookClientCA != "" {
		// The API server presents its webhook client certificate; the manager serves no other caller.
		flags = append(flags, "--webhook-client-ca="+cp.WebhookClientCA)
	}
	return flags, nil
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

// loopbackPorts returns manager flags that put the metrics and health endpoints on free loopback
// ports, for those the manager's own flags do not set.
func loopbackPorts(args []string) ([]string, error) {
	free, err := controlplane.FreePorts(2)
	if err != nil {
		return nil, err
	}
	var out []string
	if !hasFlag(args, "--metrics-bind-address") {
		out = append(out, "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(free[0]))
	}
	if !hasFlag(args, "--health-probe-bind-address") {
		out = append(out, "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(free[1]))
	}
	return out, nil
}

// hasFlag reports whether args set the flag name (as --name, --name=value or -name...).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") || a == name[1:] || strings.HasPrefix(a, name[1:]+"=") {
			return true
		}
	}
	return false
}

// localCACommonName is the subject of the CA of `run --webhooks`: not the self-signed mode's CA
// (certs.Generate's, cos-externalizer-webhook-ca), so that kubectl cos check does not take a manager
// serving files (--webhook-cert-dir) for one that keeps its own CA.
const localCACommonName = "cos-externalizer-localcluster-ca"

// servingBundle is a CA named localCACommonName and a serving certificate it signed for hosts.
func servingBundle(hosts []string, validFor time.Duration, now time.Time) (*certs.Bundle, error) {
	ca, err := certs.NewCA(localCACommonName, validFor, now)
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.Issue(certs.Leaf{CommonName: hosts[0], Usage: x509.ExtKeyUsageServerAuth, Hosts: hosts, ValidFor: validFor, Now: now})
	if err != nil {
		return nil, err
	}
	return &certs.Bundle{CA: ca.PEM, Cert: cert, Key: key}, nil
}
