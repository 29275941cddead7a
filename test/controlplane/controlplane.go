// Package controlplane starts a real, local Kubernetes control plane for tests, `make run` and
// `make cluster-up`: etcd, kube-apiserver, kube-controller-manager (garbage collector on),
// kube-scheduler and kwok with one fake node, all on loopback addresses and free ports, with a fresh
// data directory, RBAC authorization and a service-account key pair.
//
// The binaries are built from the Go module proxy by `make control-plane` into bin/. KUBEBUILDER_ASSETS
// (e.g. from setup-envtest) is searched first. When KUBECONFIG names an existing cluster, callers may
// use it instead (see FromKubeconfig); nothing local starts then.
package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	serviceIP   = "10.0.0.1"
	serviceCIDR = "10.0.0.0/24"

	// NodeName is the name of the one fake node kwok manages.
	NodeName = "kwok-node-0"
	// kwokNodeAnnotation marks the nodes kwok manages.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"

	startTimeout = 60 * time.Second
	stopTimeout  = 10 * time.Second
)

// Options configures Start.
type Options struct {
	// Dir holds the PKI, the etcd data, the component logs and the kubeconfig. Empty means a new
	// temporary directory, removed by Stop.
	Dir string
	// Detached starts the components in their own sessions, so they outlive this process (for
	// `make cluster-up`). Otherwise each component dies with this process, even on SIGKILL.
	Detached bool
	// Log, when set, receives a line per start-up step.
	Log io.Writer
	// CRDDir, when set, holds CRDs installed (InstallCRDs) once the API server is ready, before the
	// controller-manager starts: its garbage collector then knows their kinds from its start,
	// instead of from its first discovery resync, 30 seconds later.
	CRDDir string
}

// ControlPlane is a running local control plane, or an existing cluster when External is true.
type ControlPlane struct {
	// Dir is the state directory (empty for an external cluster).
	Dir string
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// External is true when the cluster was not started here.
	External bool
	// WebhookClientCA is the PEM file of the CA that signed the client certificate kube-apiserver
	// presents to admission webhooks (WebhookClientCert, WebhookClientKey): a manager started with
	// --webhook-client-ca=WebhookClientCA serves only the API server. Empty for an external cluster.
	WebhookClientCA                     string
	WebhookClientCert, WebhookClientKey string

	ownsDir bool
	procs   []*process
}

// Start builds the PKI, starts every component and returns once the API server is ready, the fake
// node is Ready and the controller-manager has created the default ServiceAccount. On error nothing
// is left running.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			_, _ = fmt.Fprintf(opts.Log, format+"\n", args...) // a log that cannot be written stops nothing
		}
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{Dir: opts.Dir}
	if cp.Dir == "" {
		removeStaleTempDirs()
		if cp.Dir, err = os.MkdirTemp("", tempPrefix); err != nil {
			return nil, err
		}
		cp.ownsDir = true
		if err := os.WriteFile(filepath.Join(cp.Dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()
	if err := os.MkdirAll(filepath.Join(cp.Dir, "logs"), 0o700); err != nil {
		return nil, err
	}
	started := time.Now()
	p, err := newPKI(filepath.Join(cp.Dir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("creating the PKI: %w", err)
	}
	cp.WebhookClientCA, cp.WebhookClientCert, cp.WebhookClientKey = p.WebhookClientCA, p.WebhookClientCert, p.WebhookClientKey
	admissionConfig, err := writeWebhookAdmission(filepath.Join(cp.Dir, "pki"), p)
	if err != nil {
		return nil, fmt.Errorf("writing the admission configuration: %w", err)
	}
	ports, err := FreePorts(6)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeerPort, apiPort, cmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	host := "https://127.0.0.1:" + strconv.Itoa(apiPort)

	cp.Kubeconfig = filepath.Join(cp.Dir, "kubeconfig")
	if err := writeKubeconfig(cp.Kubeconfig, host, p); err != nil {
		return nil, err
	}
	if cp.Config, err = clientcmd.BuildConfigFromFlags("", cp.Kubeconfig); err != nil {
		return nil, err
	}
	// A private control plane: no client-side throttling.
	cp.Config.QPS, cp.Config.Burst = 1000, 2000
	kwokConfig := filepath.Join(cp.Dir, "kwok.yaml")
	if err := writeKwokConfig(kwokConfig, bins.kwokStages); err != nil {
		return nil, err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeerPort)
	// controllerArgs are the flags kube-controller-manager and kube-scheduler share (both serve
	// their health and metrics on a secure port, with the API server's authentication), then extra.
	controllerArgs := func(port int, certDir string, extra ...string) []string {
		return append([]string{
			"--kubeconfig=" + cp.Kubeconfig,
			"--authentication-kubeconfig=" + cp.Kubeconfig, "--authorization-kubeconfig=" + cp.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(cp.Dir, certDir),
			"--v=1",
		}, extra...)
	}
	components := []struct {
		name string
		bin  string
		args []string
	}{
		{"etcd", bins.etcd, []string{
			"--name=default",
			"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
			"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=default=" + peerURL,
			"--unsafe-no-fsync", "--log-level=warn",
		}},
		{"kube-apiserver", bins.apiserver, []string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(apiPort),
			"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
			"--client-ca-file=" + p.CACert,
			"--admission-control-config-file=" + admissionConfig,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + p.SAPub,
			"--service-account-signing-key-file=" + p.SAKey,
			"--service-cluster-ip-range=" + serviceCIDR,
			"--authorization-mode=RBAC",
			"--endpoint-reconciler-type=none",
			"--allow-privileged=true",
			"--cert-dir=" + filepath.Join(cp.Dir, "apiserver-certs"),
			"--v=1",
		}},
		{"kube-controller-manager", bins.controllerManager, controllerArgs(cmPort, "controller-manager-certs",
			"--service-account-private-key-file="+p.SAKey,
			"--root-ca-file="+p.CACert,
			"--cluster-signing-cert-file="+p.CACert, "--cluster-signing-key-file="+p.CAKey,
			"--use-service-account-credentials=true",
			"--kube-api-qps=200", "--kube-api-burst=400",
		)},
		{"kube-scheduler", bins.scheduler, controllerArgs(schedPort, "scheduler-certs")},
		{"kwok", bins.kwok, []string{
			"--kubeconfig=" + cp.Kubeconfig,
			"--config=" + kwokConfig,
			"--v=WARN",
		}},
	}
	start := func(from, to int) error {
		for _, c := range components[from:to] {
			proc, err := startProcess(c.name, c.bin, c.args, filepath.Join(cp.Dir, "logs", c.name+".log"), opts.Detached)
			if err != nil {
				return err
			}
			cp.procs = append(cp.procs, proc)
			logf("started %s (pid %d)", c.name, proc.pid())
		}
		return nil
	}

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// etcd and the API server first: the controller-manager exits at once when it cannot reach the
	// API server to load its authentication configuration.
	if err := start(0, 2); err != nil {
		return nil, err
	}
	if err := cp.waitHTTP(ctx, "etcd", etcdURL+"/health", nil); err != nil {
		return nil, err
	}
	tlsCfg, err := rest.TLSConfigFor(cp.Config)
	if err != nil {
		return nil, err
	}
	if err := cp.waitHTTP(ctx, "kube-apiserver", host+"/readyz", tlsCfg); err != nil {
		return nil, err
	}
	logf("kube-apiserver ready after %s", time.Since(started).Round(10*time.Millisecond))
	if opts.CRDDir != "" {
		if _, err := InstallCRDs(ctx, cp.Config, opts.CRDDir); err != nil {
			return nil, err
		}
		logf("CRDs installed after %s", time.Since(started).Round(10*time.Millisecond))
	}
	if err := start(2, len(components)); err != nil {
		return nil, err
	}
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback health checks of self-signed components
	if err := cp.waitHTTP(ctx, "kube-controller-manager", "https://127.0.0.1:"+strconv.Itoa(cmPort)+"/healthz", insecure); err != nil {
		return nil, err
	}
	if err := cp.waitHTTP(ctx, "kube-scheduler", "https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz", insecure); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	if err := cp.registerNode(ctx, cs); err != nil {
		return nil, err
	}
	logf("node %s Ready after %s", NodeName, time.Since(started).Round(10*time.Millisecond))
	// Pods need the default ServiceAccount, which the controller-manager creates.
	if err := cp.poll(ctx, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	logf("control plane ready after %s", time.Since(started).Round(10*time.Millisecond))
	return cp, nil
}

// FromKubeconfig uses an existing cluster; nothing is started and Stop does nothing.
func FromKubeconfig(path string) (*ControlPlane, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	return &ControlPlane{Kubeconfig: path, Config: cfg, External: true}, nil
}

// Stop terminates every component (SIGTERM, then SIGKILL after 10 s) and removes a temporary
// directory. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	if cp == nil || cp.External {
		return nil
	}
	errs := stopAll(cp.procs)
	cp.procs = nil
	if cp.ownsDir && cp.Dir != "" {
		if err := os.RemoveAll(cp.Dir); err != nil {
			errs = append(errs, err)
		}
		cp.Dir = ""
	}
	return errors.Join(errs...)
}

// PIDs returns the process id of each component by name.
func (cp *ControlPlane) PIDs() map[string]int { return pids(cp.procs) }

// stopAll stops procs, the last started first, and returns what failed.
func stopAll(procs []*process) []error {
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].stop(stopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// pids returns the process id of each of procs by name.
func pids(procs []*process) map[string]int {
	out := map[string]int{}
	for _, p := range procs {
		out[p.name] = p.pid()
	}
	return out
}

// LogPath returns the log file of a component.
func (cp *ControlPlane) LogPath(component string) string {
	return filepath.Join(cp.Dir, "logs", component+".log")
}

func (cp *ControlPlane) registerNode(ctx context.Context, cs kubernetes.Interface) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": NodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"type": "kwok",
			},
		},
	}
	if err := cp.poll(ctx, "node registration", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	}); err != nil {
		return err
	}
	return cp.poll(ctx, "node "+NodeName+" Ready", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: poll again
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// poll runs cond every 100 ms until it is true, a component exits, or ctx ends.
func (cp *ControlPlane) poll(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var exited error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range cp.procs {
			if err := p.exitError(); err != nil {
				exited = err
				return false, err
			}
		}
		return cond(ctx)
	})
	if exited != nil {
		return exited
	}
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func (cp *ControlPlane) waitHTTP(ctx context.Context, component, url string, tlsCfg *tls.Config) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer client.CloseIdleConnections()
	return cp.poll(ctx, component+" at "+url, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not yet: poll again
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func writeKubeconfig(path, host string, p *pki) error {
	cert, err := os.ReadFile(p.AdminCert)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.AdminKey)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

func writeKwokConfig(path, stagesFile string) error {
	stages, err := os.ReadFile(stagesFile)
	if err != nil {
		return fmt.Errorf("reading kwok stages (built by `make control-plane`): %w", err)
	}
	cfg := `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageNodesWithAnnotationSelector: ` + kwokNodeAnnotation + `=fake
  nodeIP: 127.0.0.1
  cidr: 10.244.0.0/16
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  nodeLeaseDurationSeconds: 40
  podsOnNodeSyncParallelism: 1
`
	return os.WriteFile(path, append([]byte(cfg), stages...), 0o600)
}

const (
	tempPrefix = "cos-controlplane-"
	ownerFile  = "owner.pid"
)

// removeStaleTempDirs deletes the temporary directories of control planes whose owning process died
// without stopping them (SIGKILL, a test timeout); their components died with it.
func removeStaleTempDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			_ = os.RemoveAll(d)
		}
	}
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// process is one running component.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	mu      sync.Mutex
	err     error // set when the process exited
	stopped bool
}

func startProcess(name, bin string, args []string, logPath string, detached bool) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Own process group, and killed by the kernel if this process dies for any reason.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		werr := cmd.Wait()
		_ = logFile.Close()
		p.mu.Lock()
		if !p.stopped {
			p.err = fmt.Errorf("%s exited early (%v); last lines of %s:\n%s", name, werr, logPath, tail(logPath, 20))
		}
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *process) stop(timeout time.Duration) error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s (pid %d) did not exit", p.name, p.pid())
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
