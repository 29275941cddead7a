package deploy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/framework"
)

// TestTLSMinVersion runs the manager with --tls-min-version=VersionTLS13: its webhook server and its
// metrics server refuse a client that offers at most TLS 1.2, and serve one of TLS 1.3 the same
// certificate, the webhooks' (the metrics endpoint serves it, for scrapers to verify).
func TestTLSMinVersion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, bundle := servingCertificate(t)
	webhookPort, probePort, metricsPort := freePort(t), freePort(t), freePort(t)
	runManager(t,
		"--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(webhookPort), "--webhook-cert-dir="+dir,
		"--webhook-configuration=", // no webhook configuration points at this manager
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metricsPort),
		"--rollout=false", "--tls-min-version=VersionTLS13",
	)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.CA)
	block, _ := pem.Decode(bundle.Cert)
	served, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for name, port := range map[string]int{"webhook": webhookPort, "metrics": metricsPort} {
		addr := "127.0.0.1:" + strconv.Itoa(port)
		framework.Eventually(ctx, t, "the "+name+" server to serve TLS 1.3 with the webhooks' certificate", func(context.Context) (bool, string) {
			conn, err := tls.Dial("tcp", addr, &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: "127.0.0.1"})
			if err != nil {
				return false, err.Error()
			}
			defer func() { _ = conn.Close() }()
			state := conn.ConnectionState()
			return state.Version == tls.VersionTLS13 && state.PeerCertificates[0].Equal(served),
				fmt.Sprintf("version %x, certificate serial %x", state.Version, state.PeerCertificates[0].SerialNumber)
		})
		conn, err := tls.Dial("tcp", addr, &tls.Config{MaxVersion: tls.VersionTLS12, RootCAs: pool, ServerName: "127.0.0.1"})
		if err == nil {
			_ = conn.Close()
			t.Errorf("the %s server accepted a TLS 1.2 client", name)
		} else if !strings.Contains(err.Error(), "protocol version") {
			t.Errorf("the %s server refused a TLS 1.2 client with %v, want a protocol version alert", name, err)
		}
	}
}
