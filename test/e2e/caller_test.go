package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/webhook/server"
)

const clientName = "kube-apiserver-webhook-client"

// TestProbeCaller: ProbeCaller against servers that verify callers as the manager does (over TLS 1.3
// and 1.2), one that serves anyone, and addresses where no TLS server answers (an error, never a
// refusal).
func TestProbeCaller(t *testing.T) {
	now := time.Now()
	ca, err := certs.NewCA("client-ca", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("another-ca", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *certs.CA, name string) []tls.Certificate {
		t.Helper()
		c, k, err := ca.Issue(certs.Leaf{CommonName: name, Usage: x509.ExtKeyUsageClientAuth, ValidFor: time.Hour, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{pair}
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	servers := map[string]string{
		"manager TLS 1.3": serveHTTPS(t, caFile, tls.VersionTLS13),
		"manager TLS 1.2": serveHTTPS(t, caFile, tls.VersionTLS12),
		"anyone":          serveHTTPS(t, "", tls.VersionTLS13),
		"closes":          listen(t, func(c net.Conn) { _ = c.Close() }),
		"plain HTTP":      listen(t, func(c net.Conn) { _, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n"); _ = c.Close() }),
	}
	type want struct {
		Answered bool
		Status   int
		Refused  bool
		Err      bool
	}
	for name, tc := range map[string]struct {
		server string
		certs  []tls.Certificate
		want   want
	}{
		"no certificate, TLS 1.3":         {server: "manager TLS 1.3", want: want{Refused: true}},
		"no certificate, TLS 1.2":         {server: "manager TLS 1.2", want: want{Refused: true}},
		"the API server's, TLS 1.3":       {server: "manager TLS 1.3", certs: issue(ca, clientName), want: want{Answered: true, Status: http.StatusTeapot}},
		"the API server's, TLS 1.2":       {server: "manager TLS 1.2", certs: issue(ca, clientName), want: want{Answered: true, Status: http.StatusTeapot}},
		"another CA's":                    {server: "manager TLS 1.3", certs: issue(other, clientName), want: want{Refused: true}},
		"another name":                    {server: "manager TLS 1.3", certs: issue(ca, "someone"), want: want{Refused: true}},
		"no certificate, served anyone":   {server: "anyone", want: want{Answered: true, Status: http.StatusTeapot}},
		"closed before the handshake":     {server: "closes", want: want{Err: true}},
		"not TLS":                         {server: "plain HTTP", want: want{Err: true}},
		"closed, with a certificate":      {server: "closes", certs: issue(ca, clientName), want: want{Err: true}},
		"not TLS, with a certificate too": {server: "plain HTTP", certs: issue(ca, clientName), want: want{Err: true}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
			defer cancel()
			conn, err := net.Dial("tcp", servers[tc.server])
			if err != nil {
				t.Fatal(err)
			}
			p, err := ProbeCaller(ctx, conn, tc.certs)
			got := want{Answered: p.Answered, Status: p.Status, Refused: p.Refusal != nil, Err: err != nil}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\nrefusal: %v\nerror: %v", diff, p.Refusal, err)
			}
			t.Logf("refusal: %v; error: %v", p.Refusal, err)
		})
	}
}

// serveHTTPS serves 418 over TLS up to version maxVersion on a loopback port, verifying callers as
// the manager does against the bundle at caFile (none: any caller), and returns its address.
func serveHTTPS(t *testing.T, caFile string, maxVersion uint16) string {
	t.Helper()
	serving, err := certs.Generate([]string{"127.0.0.1"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(serving.Cert, serving.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion}
	if caFile != "" {
		ca, err := server.NewClientCA(caFile, server.ClientCAOptions{Names: []string{clientName}})
		if err != nil {
			t.Fatal(err)
		}
		ca.TLSOption()(cfg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.Serve(tls.NewListener(l, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// listen accepts connections on a loopback port and hands each to handle; it returns the address.
func listen(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return l.Addr().String()
}
