package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
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
	// ServingCA is the PEM CA of the webhook server's certificate.
	ServingCA []byte
	// ClientCert is the API server's webhook client certificate when the manager authenticates its
	// callers (--webhook-client-ca, the local control plane's default), else nil.
	ClientCert *tls.Certificate
	cancel     context.CancelFunc
	done       chan error
	stopped    bool
	// exited is closed when the manager's run returns, for whatever reason (Exited).
	exited chan struct{}
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
	// On the local control plane the API server presents a client certificate to webhooks: the
	// manager accepts no other caller. A test's own --webhook-client-ca (e.g. empty) wins.
	var clientAuth []string
	if e.WebhookClientCA != "" {
		clientAuth = []string{"--webhook-client-ca=" + e.WebhookClientCA}
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
	}, append(clientAuth, args...)...)
	if err := fs.Parse(all); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Tests, -count and the retries of StartManagerWith start managers, and so their controllers,
	// more than once in this process.
	o.SkipControllerNameValidation = true
	if adjust != nil {
		adjust(&o)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		WebhookURL: "https://127.0.0.1:" + strconv.Itoa(ports[0]),
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[2]) + "/metrics",
		ServingCA:  bundle.CA,
		cancel:     cancel,
		done:       make(chan error, 1),
		exited:     make(chan struct{}),
	}
	if e.WebhookClientCA != "" && sameFileContent(webhookClientCAFlag(fs), e.WebhookClientCA) {
		cert, err := tls.LoadX509KeyPair(e.WebhookClientCert, e.WebhookClientKey)
		if err != nil {
			cancel()
			return nil, err
		}
		m.ClientCert = &cert
	}
	running = true
	go func() {
		defer func() { _ = os.RemoveAll(dir) }()
		err := app.Run(runCtx, e.Config, &o)
		close(m.exited)
		m.done <- err
	}()
	var dialErr error // the last dial's: the server may not listen yet
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-m.done:
			m.stopped = true
			return false, fmt.Errorf("manager exited: %w", err)
		default:
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(ports[0]), m.TLSConfig(true))
		if err == nil {
			// A request: the server's verdict on a client certificate comes after the client's
			// handshake; any answer (404) means it serves.
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: webhook\r\nConnection: close\r\n\r\n"); err == nil {
				var resp *http.Response
				if resp, err = http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
					_ = resp.Body.Close()
				}
			}
			_ = conn.Close()
		}
		dialErr = err
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

// TLSConfig is a client configuration for the manager's webhook server: trusting its certificate and,
// with clientCert, presenting the API server's webhook client certificate (when it has one).
func (m *Manager) TLSConfig(clientCert bool) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.ServingCA)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if clientCert && m.ClientCert != nil {
		cfg.Certificates = []tls.Certificate{*m.ClientCert}
	}
	return cfg
}

// sameFileContent reports whether the files at a and b hold the same bytes (a copy of the client CA
// a test swaps stands for the control plane's own).
func sameFileContent(a, b string) bool {
	if a == "" || a == b {
		return a == b
	}
	x, err := os.ReadFile(a)
	if err != nil {
		return false
	}
	y, err := os.ReadFile(b)
	return err == nil && bytes.Equal(x, y)
}

// webhookClientCAFlag is the parsed --webhook-client-ca.
func webhookClientCAFlag(fs *flag.FlagSet) string {
	if f := fs.Lookup("webhook-client-ca"); f != nil {
		return f.Value.String()
	}
	return ""
}

// Exited reports whether the manager's run has returned: stopped, or ended by itself (a crash).
func (m *Manager) Exited() bool {
	select {
	case <-m.exited:
		return true
	default:
		return false
	}
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
