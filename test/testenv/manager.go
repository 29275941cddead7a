package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// SystemNamespace is the system namespace the test managers use.
const SystemNamespace = olmv1.DefaultSystemNamespace

// Manager is the cos-externalizer manager running in this process against the environment, with its
// webhook configurations installed and pointing at it.
type Manager struct {
	WebhookURL string
	MetricsURL string
	cancel     context.CancelFunc
	done       chan error
	stopped    bool
}

// StartManager runs the manager with a fresh serving certificate on a free loopback port, waits until
// its webhook server answers, and installs the webhook configurations. args add manager flags.
func (e *Environment) StartManager(ctx context.Context, args ...string) (*Manager, error) {
	return e.StartManagerWith(ctx, nil, args...)
}

// StartManagerWith is StartManager with a hook that adjusts the options after the flags are parsed
// (e.g. a shifted clock). A manager that exits because a port FreePorts gave it was taken by another
// process before it listened (test packages run in parallel, each picking ports) is started again on
// new ports, twice at most.
func (e *Environment) StartManagerWith(ctx context.Context, adjust func(*app.Options), args ...string) (*Manager, error) {
	for attempt := 0; ; attempt++ {
		m, err := e.startManager(ctx, adjust, args)
		if err == nil || attempt == 2 || !strings.Contains(err.Error(), "address already in use") {
			return m, err
		}
	}
}

func (e *Environment) startManager(ctx context.Context, adjust func(*app.Options), args []string) (*Manager, error) {
	// Inside the control plane's directory when it has one: removed with it, and, should this process
	// be killed, by the next control plane's sweep of stale directories.
	dir, err := os.MkdirTemp(e.Dir, "cos-manager-")
	if err != nil {
		return nil, err
	}
	running := false // from then on, the manager's goroutine removes dir
	defer func() {
		if !running {
			_ = os.RemoveAll(dir)
		}
	}()
	bundle, err := certs.Generate([]string{"127.0.0.1"}, 24*time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	if err := bundle.Write(dir); err != nil {
		return nil, err
	}
	if err := controlplane.EnsureNamespace(ctx, e.Config, SystemNamespace); err != nil {
		return nil, err
	}
	ports, err := controlplane.FreePorts(3)
	if err != nil {
		return nil, err
	}
	var o app.Options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.Bind(fs)
	all := append([]string{
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(ports[0]), "--webhook-cert-dir=" + dir,
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[2]), "--metrics-secure=false",
		// Tests stop managers often and no API server keeps connections to them: stop at once.
		"--shutdown-drain-period=0",
		"--system-namespace=" + SystemNamespace,
	}, args...)
	if err := fs.Parse(all); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if adjust != nil {
		adjust(&o)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		WebhookURL: "https://127.0.0.1:" + strconv.Itoa(ports[0]),
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[2]) + "/metrics",
		cancel:     cancel,
		done:       make(chan error, 1),
	}
	running = true
	go func() {
		defer func() { _ = os.RemoveAll(dir) }()
		m.done <- app.Run(runCtx, e.Config, &o)
	}()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.CA)
	var dialErr error // the last dial's: the server may not listen yet
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-m.done:
			m.stopped = true
			return false, fmt.Errorf("manager exited: %w", err)
		default:
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(ports[0]), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if dialErr = err; err == nil {
			_ = conn.Close()
		}
		return dialErr == nil, nil
	})
	if err != nil {
		_ = m.Stop()
		return nil, fmt.Errorf("waiting for the webhook server (last dial: %v): %w", dialErr, err)
	}
	manifests, err := controlplane.WebhookManifests()
	if err != nil {
		_ = m.Stop()
		return nil, err
	}
	if err := controlplane.InstallWebhooks(ctx, e.Config, manifests, m.WebhookURL, bundle.CA); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// Stop stops the manager (its webhook configurations stay: requests then fail closed) and waits for
// it to return.
func (m *Manager) Stop() error {
	if m.stopped {
		return nil
	}
	m.stopped = true
	m.cancel()
	select {
	case err := <-m.done:
		return err
	case <-time.After(30 * time.Second):
		return errors.New("manager did not stop within 30s")
	}
}

// RemoveWebhooks deletes the webhook configurations, so requests no longer go to any manager.
func (e *Environment) RemoveWebhooks(ctx context.Context) error {
	manifests, err := controlplane.WebhookManifests()
	if err != nil {
		return err
	}
	return controlplane.UninstallWebhooks(ctx, e.Config, manifests)
}
