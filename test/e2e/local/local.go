// Package local runs the e2e suite (package test/e2e) on the local control plane: cert-manager's
// controller and cainjector as processes beside the API server, manager replicas as processes of the
// binary built from this tree, and a Balancer in front of them where a cluster has the webhook
// Service. The webhook configurations and cert-manager's objects are those of config/default and
// config/self-signed, with two local changes: the webhooks are called by URL (the Balancer), and
// the serving Certificate gets the IP SAN 127.0.0.1.
package local

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/e2e"
)

const (
	fieldManager   = "e2e-deploy"
	serviceAccount = "cos-externalizer"
)

// Cluster is the local control plane with manager replicas; it implements e2e.Cluster.
type Cluster struct {
	cp      *controlplane.ControlPlane
	client  client.Client
	manager string // the manager binary
	root    string // the repository
	lb      *Balancer
	logf    func(format string, args ...any)

	mu       sync.Mutex
	replicas []*replica
	deploys  int
}

type replica struct {
	proc *controlplane.Process
	// starting keeps a replica of Switch out of the load balancer until it is ready, as a Service
	// leaves out a Pod that is not.
	starting                        bool
	logPath                         string
	webhookPort, probePort, metrics int
}

var _ e2e.Cluster = (*Cluster)(nil)

// New prepares the cluster: the manager binary and the Balancer. cert-manager must be running.
func New(cp *controlplane.ControlPlane, manager string) (*Cluster, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	lb, err := NewBalancer()
	if err != nil {
		return nil, err
	}
	return &Cluster{cp: cp, client: c, manager: manager, root: root, lb: lb, logf: func(string, ...any) {}}, nil
}

// SetLogf directs the suite's figures (t.Logf of the running test).
func (c *Cluster) SetLogf(f func(format string, args ...any)) { c.logf = f }

func (c *Cluster) Logf(format string, args ...any) { c.logf(format, args...) }
func (c *Cluster) Config() *rest.Config            { return c.cp.Config }
func (c *Cluster) Namespace() string               { return olmv1.DefaultSystemNamespace }

func (c *Cluster) Replicas() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.replicas)
}

// Close stops every replica and the Balancer.
func (c *Cluster) Close() error {
	errs := []error{c.stopAll()}
	return errors.Join(append(errs, c.lb.Close())...)
}

// stopAll stops every replica, all at once: each drains its connections for its shutdown drain
// period, and one after another they would add up, for every case's Deploy.
func (c *Cluster) stopAll() error {
	c.mu.Lock()
	reps := c.replicas
	c.replicas = nil
	c.mu.Unlock()
	errs := make([]error, len(reps))
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Go(func() { errs[i] = r.proc.Stop(30 * time.Second) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Deploy stops the replicas, installs the overlay's certificate objects and webhook configurations
// for mode, starts n replicas and waits until each is ready (it serves a certificate that the
// webhook configurations trust).
func (c *Cluster) Deploy(ctx context.Context, mode string, n int, extra ...string) error {
	if err := c.stopAll(); err != nil {
		return err
	}
	if err := controlplane.EnsureNamespace(ctx, c.cp.Config, c.Namespace()); err != nil {
		return err
	}
	overlay := e2e.Overlay(mode)
	if err := e2e.ResetCA(ctx, c.client, c.Namespace(), mode); err != nil {
		return err
	}
	if err := c.applyOverlay(ctx, overlay); err != nil {
		return err
	}
	c.mu.Lock()
	c.deploys++
	deploy := c.deploys
	c.mu.Unlock()
	for i := range n {
		r, err := c.start(deploy, i, mode, extra)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.replicas = append(c.replicas, r)
		c.mu.Unlock()
	}
	c.setBackends()
	for i := range n {
		if err := c.ready(ctx, deploy, i, mode, extra); err != nil {
			return err
		}
	}
	return nil
}

// Switch starts a replica of mode, waits until it is ready, then takes the oldest replica out of the
// load balancer and stops it, once per replica, as a rolling update with one surge replica does.
func (c *Cluster) Switch(ctx context.Context, mode string) error {
	if err := c.applyOverlay(ctx, e2e.Overlay(mode)); err != nil {
		return err
	}
	c.mu.Lock()
	c.deploys++
	deploy, n := c.deploys, len(c.replicas)
	c.mu.Unlock()
	for k := range n {
		r, err := c.start(deploy, k, mode, nil)
		if err != nil {
			return err
		}
		r.starting = true
		c.mu.Lock()
		c.replicas = append(c.replicas, r)
		last := len(c.replicas) - 1
		c.mu.Unlock()
		if err := c.ready(ctx, deploy, last, mode, nil); err != nil {
			return err
		}
		c.mu.Lock()
		c.replicas[last].starting = false
		old := c.replicas[0]
		c.replicas = c.replicas[1:]
		c.mu.Unlock()
		c.setBackends()
		if err := old.proc.Stop(30 * time.Second); err != nil {
			return err
		}
	}
	return nil
}

// applyOverlay applies what the replicas need of the overlay: its certificate objects, RBAC and
// webhook configurations (pointed at the load balancer).
func (c *Cluster) applyOverlay(ctx context.Context, overlay string) error {
	objs, err := c.render(overlay)
	if err != nil {
		return err
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "Issuer", "Certificate", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			if err := c.pointAtBalancer(u); err != nil {
				return err
			}
		default:
			continue // the manager runs as processes, as the overlay's ServiceAccount (see start)
		}
		if u.GetKind() == "Certificate" && u.GetName() == e2e.CertificateName {
			// The local patch: the API server calls 127.0.0.1.
			if err := unstructured.SetNestedStringSlice(u.Object, []string{"127.0.0.1"}, "spec", "ipAddresses"); err != nil {
				return err
			}
		}
		if err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// setBackends points the load balancer at every replica's webhook port.
func (c *Cluster) setBackends() {
	c.mu.Lock()
	defer c.mu.Unlock()
	backends := make([]string, 0, len(c.replicas))
	for _, r := range c.replicas {
		if r.starting {
			continue
		}
		backends = append(backends, net.JoinHostPort("127.0.0.1", strconv.Itoa(r.webhookPort)))
	}
	c.lb.SetBackends(backends)
}

// ready waits until replica i is ready. A replica that exited because a port FreePorts gave it was
// taken by another process before it listened (other tests on the machine pick ports too) is started
// again on new ports, twice at most: that race is the harness's, not the manager's.
func (c *Cluster) ready(ctx context.Context, deploy, i int, mode string, extra []string) error {
	for attempt := 0; ; attempt++ {
		err := c.waitReady(ctx, i)
		r, rerr := c.replica(i)
		if err == nil || rerr != nil || attempt == 2 || r.proc.ExitError() == nil || !lostPort(r.logPath) {
			return err
		}
		next, err := c.start(deploy, i, mode, extra)
		if err != nil {
			return err
		}
		next.starting = r.starting
		c.mu.Lock()
		c.replicas[i] = next
		c.mu.Unlock()
		c.setBackends()
	}
}

// lostPort reports whether the replica's log says a port it was to listen on was in use.
func lostPort(logPath string) bool {
	b, err := os.ReadFile(logPath)
	return err == nil && strings.Contains(string(b), "bind: address already in use")
}

// render is `kubectl kustomize config/<overlay>`, parsed.
func (c *Cluster) render(overlay string) ([]*unstructured.Unstructured, error) {
	kubectl, err := controlplane.Binary("kubectl")
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(c.root, "config", overlay)).Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize config/%s: %w", overlay, err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(out)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// pointAtBalancer replaces each webhook's Service reference with the Balancer's URL and the same path.
func (c *Cluster) pointAtBalancer(u *unstructured.Unstructured) error {
	hooks, _, err := unstructured.NestedSlice(u.Object, "webhooks")
	if err != nil {
		return err
	}
	for i, h := range hooks {
		m := h.(map[string]any)
		path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
		unstructured.RemoveNestedField(m, "clientConfig", "service")
		if err := unstructured.SetNestedField(m, "https://"+c.lb.Addr()+path, "clientConfig", "url"); err != nil {
			return err
		}
		hooks[i] = m
	}
	return unstructured.SetNestedSlice(u.Object, hooks, "webhooks")
}

func (c *Cluster) start(deploy, i int, mode string, extra []string) (*replica, error) {
	ports, err := controlplane.FreePorts(3)
	if err != nil {
		return nil, err
	}
	r := &replica{webhookPort: ports[0], probePort: ports[1], metrics: ports[2]}
	kubeconfig, err := c.serviceAccountKubeconfig()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig, "--leader-elect",
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(r.webhookPort),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(r.probePort),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(r.metrics), "--metrics-secure=false",
		"--webhook-cert-source=" + mode, "--webhook-cert-hosts=127.0.0.1",
	}, extra...)
	r.logPath = c.cp.LogPath(fmt.Sprintf("manager-%d-%d", deploy, i))
	if r.proc, err = controlplane.StartProcess(fmt.Sprintf("manager %d", i), c.manager, args, r.logPath); err != nil {
		return nil, err
	}
	return r, nil
}

// serviceAccountKubeconfig is the admin kubeconfig impersonating the manager's ServiceAccount, so the
// replicas run with the overlay's RBAC and nothing more. It is written beside and renamed into
// place: a replica started just before may be reading it (written in place, it read an empty file
// now and then, and exited).
func (c *Cluster) serviceAccountKubeconfig() (string, error) {
	path := filepath.Join(c.cp.Dir, "kubeconfig-manager")
	cfg, err := clientcmd.LoadFromFile(c.cp.Kubeconfig)
	if err != nil {
		return "", err
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + c.Namespace() + ":" + serviceAccount
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + c.Namespace(), "system:authenticated"}
	}
	tmp := path + ".new"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

func (c *Cluster) replica(i int) (*replica, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.replicas) {
		return nil, fmt.Errorf("no replica %d", i)
	}
	return c.replicas[i], nil
}

func (c *Cluster) waitReady(ctx context.Context, i int) error {
	r, err := c.replica(i)
	if err != nil {
		return err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(r.probePort) + "/readyz?verbose"
	last := ""
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := r.proc.ExitError(); err != nil {
			return false, err
		}
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer func() { _ = resp.Body.Close() }() // read to the end or not at all: nothing to lose
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "failed") {
				b.WriteString(sc.Text() + "; ")
			}
		}
		last = fmt.Sprintf("%d %s", resp.StatusCode, b.String())
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("replica %d not ready: %w (last: %s); its log, without probe noise, ends:\n%s", i, err, last, logTail(r.logPath, 15))
	}
	return nil
}

func (c *Cluster) Served(ctx context.Context, i int) (*x509.Certificate, error) {
	r, err := c.replica(i)
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // reads the served certificate; trust is checked by the caller
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.webhookPort)))
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }() // only the handshake was needed
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// Leader reads each replica's leader_election_master_status metric.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	var leader int
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for i := range c.Replicas() {
			r, _ := c.replica(i)
			select {
			case <-r.proc.Exited():
				continue
			default:
			}
			resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(r.metrics) + "/metrics")
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "leader_election_master_status{") && strings.HasSuffix(sc.Text(), " 1") {
					leader = i
					_ = resp.Body.Close()
					return true, nil
				}
			}
			_ = resp.Body.Close()
		}
		return false, nil
	})
	return leader, err
}

func (c *Cluster) Kill(_ context.Context, i int) error {
	r, err := c.replica(i)
	if err != nil {
		return err
	}
	r.proc.Kill()
	return nil
}

func (c *Cluster) Stop(_ context.Context, i int) error {
	r, err := c.replica(i)
	if err != nil {
		return err
	}
	return r.proc.Stop(30 * time.Second)
}

// Restarts counts replicas that exited on their own (the local harness does not restart them).
func (c *Cluster) Restarts(context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.replicas {
		if r.proc.ExitError() != nil {
			n++
		}
	}
	return n, nil
}

// BuildManager builds the manager from this tree into dir.
func BuildManager(dir string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "cos-externalizer")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/cos-externalizer")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the manager: %w\n%s", err, b)
	}
	return out, nil
}

// logTail is the last n lines of a replica's log, without the lines of failing probes.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.Contains(l, "healthz check failed") && !strings.Contains(l, "TLS handshake error") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
