//go:build e2e_kind

// Package kind runs the e2e suite (package test/e2e) on a kind cluster that `make test-e2e` has set
// up: cert-manager installed, the image loaded and config/default deployed; before it, the README's
// Helm install into cos-system with the NetworkPolicies the cluster enforces (helm_test.go). Replicas are the
// manager Deployment's Pods; the webhooks are reached through their Service, as in any cluster.
// With E2E_WEBHOOK_AUTH_DIR (make test-e2e sets it: hack/kind/webhookauth's folder, which the cluster
// config mounts into the node for the API server), every case deploys with the folder's client CA
// (config/components/webhook-client-ca), so the webhooks serve only the API server.
// Only this file differs from the local run (test/e2e/local), and it needs Docker, so CI does not
// run it.
package kind

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/e2e"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
)

// The suite's clients log through controller-runtime's logger: set it before their first use (unset,
// controller-runtime prints a stack trace after 30 s that reads like a panic in the suite's output).
func init() {
	ctrllog.SetLogger(klog.NewKlogr())
}

const deployment = "cos-externalizer"

// What config/components/webhook-client-ca mounts: the ConfigMap of the client CA, its key.
const (
	clientCAComponent = "components/webhook-client-ca"
	clientCAConfigMap = "cos-externalizer-webhook-client-ca"
	clientCAKey       = "ca.crt"
)

type cluster struct {
	t      *testing.T
	cfg    *rest.Config
	client client.Client
	// ns is the manager's namespace: config/default's, or the Helm release's (helm_test.go).
	ns string
	// auth is the API server's client CA and certificate (E2E_WEBHOOK_AUTH_DIR), or nil: the
	// managers then serve any caller.
	auth *webhookAuth
}

// webhookAuth is what hack/kind/webhookauth wrote: the CA the managers trust, and the client
// certificate the cluster's API server presents (the harness presents it too, to read what a
// replica serves).
type webhookAuth struct {
	caPEM  []byte
	client tls.Certificate
}

func loadWebhookAuth(dir string) (*webhookAuth, error) {
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		return nil, err
	}
	return &webhookAuth{caPEM: ca, client: pair}, nil
}

func TestE2E(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	var auth *webhookAuth
	if dir := os.Getenv("E2E_WEBHOOK_AUTH_DIR"); dir != "" {
		if auth, err = loadWebhookAuth(dir); err != nil {
			t.Fatalf("E2E_WEBHOOK_AUTH_DIR: %v", err)
		}
		t.Logf("the API server authenticates to the webhooks: every case deploys with %s (client CA of %s)", clientCAComponent, dir)
	} else {
		t.Log("no E2E_WEBHOOK_AUTH_DIR: the webhooks serve any caller")
	}
	// The README's Helm install first, on the new cluster as a platform team finds it; it leaves the
	// cluster as it found it (its last step runs the removal commands the chart's notes print).
	t.Run("HelmInstallInCosSystem", func(t *testing.T) {
		helmInstallInCosSystem(t, &cluster{t: t, cfg: cfg, client: cl, auth: auth, ns: helmNamespace})
	})
	for _, name := range e2e.Order {
		t.Run(name, func(t *testing.T) {
			e2e.Cases[name](t, &cluster{t: t, cfg: cfg, client: cl, auth: auth, ns: olmv1.DefaultSystemNamespace})
		})
	}
}

// RunnableImage is E2E_RUNNABLE_IMAGE: make test-e2e-sources sets it to the pause image of its node
// image, as its nodes can pull no workload image (e2e.RunEverywhere).
func (c *cluster) RunnableImage() string { return os.Getenv("E2E_RUNNABLE_IMAGE") }

func (c *cluster) Config() *rest.Config            { return c.cfg }
func (c *cluster) Namespace() string               { return c.ns }
func (c *cluster) Logf(format string, args ...any) { c.t.Helper(); c.t.Logf(format, args...) }

// Deploy runs `make deploy` with the overlay of mode and patches replicas and extra flags in.
func (c *cluster) Deploy(ctx context.Context, mode string, n int, extra ...string) error {
	overlay := e2e.Overlay(mode)
	// Each case starts from no manager, as the local suite starts new processes: the previous case's
	// replicas (another mode, other flags) are gone first.
	if err := c.client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace(), Name: deployment}},
		client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		return err
	}
	framework.WaitGone(ctx, c.t, c.client, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace(), Name: deployment}})
	if err := e2e.ResetCA(ctx, c.client, c.Namespace(), mode); err != nil {
		return err
	}
	if err := c.writeClientCA(ctx); err != nil {
		return err
	}
	// The replicas and flags go in with the overlay, so no replica ever runs without them (one that
	// did could make the self-signed CA with the default lifetime).
	deploy := exec.CommandContext(ctx, "make", "-C", "../../..", "deploy", "OVERLAY="+overlay, "IMG="+os.Getenv("IMG"), "KUBECTL=kubectl",
		"DEPLOY_REPLICAS="+strconv.Itoa(n), "DEPLOY_ARGS="+strings.Join(extra, " "), "DEPLOY_COMPONENTS="+c.components())
	if out, err := deploy.CombinedOutput(); err != nil {
		return fmt.Errorf("make deploy: %w\n%s", err, out)
	}
	rollout := exec.CommandContext(ctx, "kubectl", "rollout", "status", "-n", c.Namespace(), "deployment/"+deployment, "--timeout=5m")
	if out, err := rollout.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl rollout status: %w\n%s", err, out)
	}
	if err := c.routed(ctx); err != nil {
		return err
	}
	return c.refusesStrangers(ctx)
}

// components are the DEPLOY_COMPONENTS of every deploy: the client CA's when the API server
// authenticates.
func (c *cluster) components() string {
	if c.auth == nil {
		return ""
	}
	return clientCAComponent
}

// writeClientCA puts the client CA into the ConfigMap the component mounts (and the namespace, which
// the overlay would create only with the Deployment that needs the ConfigMap).
func (c *cluster) writeClientCA(ctx context.Context) error {
	if c.auth == nil {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace()}}
	if err := c.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace(), Name: clientCAConfigMap}}
	_, err := controllerutil.CreateOrUpdate(ctx, c.client, cm, func() error {
		cm.Data = map[string]string{clientCAKey: string(c.auth.caPEM)}
		return nil
	})
	return err
}

// refusesStrangers checks, when the API server authenticates, that a replica refuses a caller without
// the client certificate and answers one with it (any status: the path is none of the webhooks'),
// straight to its Pod (port-forward), past the Service and any NetworkPolicy. e2e.ProbeCaller makes
// the verdict: once the replica has presented its certificate or sent an alert, only an HTTP answer
// counts as answered, however long anything takes. A probe that did not reach the replica (the
// port-forward failed, the connection closed before the handshake) says nothing about the caller: it
// is tried again through a new port-forward, and after three such tries the check fails as unable to
// tell, never as a refusal.
func (c *cluster) refusesStrangers(ctx context.Context) error {
	if c.auth == nil {
		return nil
	}
	p, err := c.pod(ctx, 0)
	if err != nil {
		return err
	}
	stranger, err := c.probeCaller(ctx, p, nil)
	if err != nil {
		return fmt.Errorf("replica %s: could not tell whether it refuses a caller without a client certificate: %w", p.Name, err)
	}
	if stranger.Answered {
		return fmt.Errorf("replica %s answered %d to a caller without a client certificate: the webhooks serve anyone", p.Name, stranger.Status)
	}
	c.Logf("replica %s refused a caller without a client certificate: %v", p.Name, stranger.Refusal)
	holder, err := c.probeCaller(ctx, p, []tls.Certificate{c.auth.client})
	if err != nil {
		return fmt.Errorf("replica %s: could not tell whether it answers the API server's client certificate: %w", p.Name, err)
	}
	if !holder.Answered {
		if holder.IsTLSAlert() {
			return fmt.Errorf("replica %s refused the API server's client certificate (a TLS alert): %w", p.Name, holder.Refusal)
		}
		return fmt.Errorf("replica %s completed the handshake with the API server's client certificate but did not answer (no TLS alert): %w", p.Name, holder.Refusal)
	}
	return nil
}

// probeCaller runs e2e.ProbeCaller against the Pod's webhook port, each try through a port-forward of
// its own: a refused handshake ends the port-forward it went through (kubectl port-forward prints
// "lost connection to pod"), so a second request through it would fail whatever the replica does.
func (c *cluster) probeCaller(ctx context.Context, p corev1.Pod, certs []tls.Certificate) (e2e.CallerProbe, error) {
	try := func() (e2e.CallerProbe, error) {
		port, stop, err := c.forward(p)
		if err != nil {
			return e2e.CallerProbe{}, fmt.Errorf("port-forward: %w", err)
		}
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, e2e.ProbeTimeout)
		defer cancel()
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return e2e.CallerProbe{}, err
		}
		return e2e.ProbeCaller(ctx, conn, certs)
	}
	var errs []error
	for range 3 {
		probe, err := try()
		if err == nil {
			return probe, nil
		}
		errs = append(errs, err)
	}
	return e2e.CallerProbe{}, errors.Join(errs...)
}

// Switch applies mode's overlay over the running Deployment (same replicas): the Deployment controller
// rolls the Pods as it does for a user's kubectl apply.
func (c *cluster) Switch(ctx context.Context, mode string) error {
	deploy := exec.CommandContext(ctx, "make", "-C", "../../..", "deploy", "OVERLAY="+e2e.Overlay(mode), "IMG="+os.Getenv("IMG"), "KUBECTL=kubectl",
		"DEPLOY_REPLICAS="+strconv.Itoa(c.Replicas()), "DEPLOY_COMPONENTS="+c.components())
	if out, err := deploy.CombinedOutput(); err != nil {
		return fmt.Errorf("make deploy: %w\n%s", err, out)
	}
	rollout := exec.CommandContext(ctx, "kubectl", "rollout", "status", "-n", c.Namespace(), "deployment/"+deployment, "--timeout=5m")
	if out, err := rollout.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl rollout status: %w\n%s", err, out)
	}
	return c.routed(ctx)
}

// routed waits until the API server reaches the webhooks through their Service: a dry-run create of
// a ClusterObjectSet is admitted. Ready replicas are not enough: kube-proxy programs the Service's
// new endpoints a moment later, and until it has, a call to the ClusterIP is refused (or, on a machine
// whose network intercepts port 443, answered by someone else: docs/e2e.md).
func (c *cluster) routed(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		probe := builders.COS("e2e-routed", builders.WithPhase("config", builders.Inline(builders.ConfigMap("default", "e2e-routed", map[string]string{"k": "v"}))))
		last = c.client.Create(ctx, probe, client.DryRunAll)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the webhooks were not reached through their Service: %w (last: %w)", err, last)
	}
	return nil
}

// pods are the Deployment's running Pods, by name.
func (c *cluster) pods(ctx context.Context) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.client.List(ctx, list, client.InNamespace(c.Namespace()), client.MatchingLabels{"app.kubernetes.io/name": "cos-externalizer", "app.kubernetes.io/component": "manager"}); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (c *cluster) pod(ctx context.Context, i int) (corev1.Pod, error) {
	pods, err := c.pods(ctx)
	if err != nil {
		return corev1.Pod{}, err
	}
	if i >= len(pods) {
		return corev1.Pod{}, fmt.Errorf("no replica %d of %d", i, len(pods))
	}
	return pods[i], nil
}

func (c *cluster) Replicas() int {
	pods, _ := c.pods(context.Background())
	return len(pods)
}

// Served port-forwards to the Pod's webhook port and reads the certificate it serves (presenting the
// API server's client certificate, when the managers want one).
func (c *cluster) Served(ctx context.Context, i int) (*x509.Certificate, error) {
	p, err := c.pod(ctx, i)
	if err != nil {
		return nil, err
	}
	port, stop, err := c.forward(p)
	if err != nil {
		return nil, err
	}
	defer stop()
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // reads the served certificate
	if c.auth != nil {
		cfg.Certificates = []tls.Certificate{c.auth.client}
	}
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// forward port-forwards a local port to the Pod's webhook port (9443) until stop.
func (c *cluster) forward(p corev1.Pod) (port uint16, stop func(), err error) {
	transport, upgrader, err := spdy.RoundTripperFor(c.cfg)
	if err != nil {
		return 0, nil, err
	}
	req := fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s/portforward", strings.TrimRight(c.cfg.Host, "/"), p.Namespace, p.Name)
	u, err := http.NewRequest(http.MethodPost, req, nil)
	if err != nil {
		return 0, nil, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u.URL)
	stopCh, ready := make(chan struct{}), make(chan struct{})
	stop = func() { close(stopCh) }
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:9443"}, stopCh, ready, nil, os.Stderr)
	if err != nil {
		return 0, nil, err
	}
	go func() { _ = fw.ForwardPorts() }()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		stop()
		return 0, nil, fmt.Errorf("port-forward to %s did not become ready", p.Name)
	}
	ports, err := fw.GetPorts()
	if err != nil {
		stop()
		return 0, nil, err
	}
	if len(ports) == 0 {
		stop()
		return 0, nil, errors.New("port-forward: no local port")
	}
	return ports[0].Local, stop, nil
}

// Leader maps the Lease holder (hostname_uuid; the hostname is the Pod's name) to a replica.
func (c *cluster) Leader(ctx context.Context) (int, error) {
	var leader int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		lease := &coordinationv1.Lease{}
		if err := c.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace(), Name: e2e.LeaseName}, lease); err != nil {
			return false, nil //nolint:nilerr // no Lease yet (or a failed read): poll again
		}
		pods, err := c.pods(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // a list that failed says nothing yet: poll again
		}
		for i, p := range pods {
			if strings.HasPrefix(ptr.Deref(lease.Spec.HolderIdentity, ""), p.Name+"_") {
				leader = i
				return true, nil
			}
		}
		return false, nil
	})
	return leader, err
}

// Kill deletes the Pod at once (grace period 0), as a node failure would end it.
func (c *cluster) Kill(ctx context.Context, i int) error {
	p, err := c.pod(ctx, i)
	if err != nil {
		return err
	}
	return c.client.Delete(ctx, &p, client.GracePeriodSeconds(0))
}

// Stop scales the Deployment down by one: a graceful stop that is not undone.
func (c *cluster) Stop(ctx context.Context, _ int) error {
	d := &appsv1.Deployment{}
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace(), Name: deployment}, d); err != nil {
		return err
	}
	d.Spec.Replicas = ptr.To(ptr.Deref(d.Spec.Replicas, 1) - 1)
	if err := c.client.Update(ctx, d); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.pods(ctx)
		return err == nil && int32(len(pods)) == *d.Spec.Replicas, nil
	})
}

// Restarts sums the container restarts of the Deployment's Pods.
func (c *cluster) Restarts(ctx context.Context) (int, error) {
	pods, err := c.pods(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		for _, s := range p.Status.ContainerStatuses {
			n += int(s.RestartCount)
		}
	}
	return n, nil
}
