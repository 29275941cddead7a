package server

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
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
)

// testPKI is a serving certificate for 127.0.0.1 and two client CAs with their client certificates.
type testPKI struct {
	serving    tls.Certificate
	servingCA  *x509.CertPool
	caA, caB   *certs.CA
	clientA    tls.Certificate // CN apiserver, signed by caA
	clientA2   tls.Certificate // CN someone-else, signed by caA
	clientB    tls.Certificate // CN apiserver, signed by caB
	caAFile    string
	caBFilePEM []byte
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	now := time.Now()
	b, err := certs.Generate([]string{"127.0.0.1"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{servingCA: x509.NewCertPool()}
	if p.serving, err = tls.X509KeyPair(b.Cert, b.Key); err != nil {
		t.Fatal(err)
	}
	p.servingCA.AppendCertsFromPEM(b.CA)
	if p.caA, err = certs.NewCA("client-ca-a", time.Hour, now); err != nil {
		t.Fatal(err)
	}
	if p.caB, err = certs.NewCA("client-ca-b", time.Hour, now); err != nil {
		t.Fatal(err)
	}
	p.clientA = issueClient(t, p.caA, "apiserver", nil)
	p.clientA2 = issueClient(t, p.caA, "someone-else", []string{"other.example"})
	p.clientB = issueClient(t, p.caB, "apiserver", nil)
	p.caAFile = filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(p.caAFile, p.caA.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	p.caBFilePEM = p.caB.PEM
	return p
}

func issueClient(t *testing.T, ca *certs.CA, cn string, hosts []string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(certs.Leaf{CommonName: cn, Hosts: hosts, Usage: x509.ExtKeyUsageClientAuth, ValidFor: time.Hour, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// served is one request the test handler saw.
type served struct {
	authenticated bool
	bodyLen       int
	readErr       error
}

// startServer runs a Server with a handler at /echo that reads the body and reports what it saw.
func startServer(t *testing.T, p *testPKI, o Options, register ...func(*Server)) (string, chan served) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	o.Host, o.Port = "127.0.0.1", port
	o.TLSOpts = append(o.TLSOpts, func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &p.serving, nil }
	})
	s := New(o)
	seen := make(chan served, 16)
	s.Register("/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		seen <- served{authenticated: r.TLS != nil && len(r.TLS.VerifiedChains) > 0, bodyLen: len(b), readErr: err}
		if err != nil {
			http.Error(w, "reading the body", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	for _, r := range register {
		r(s)
	}
	if err := s.StartedChecker()(nil); err == nil {
		t.Fatal("StartedChecker: healthy before Start")
	}
	framework.Start(context.Background(), t, "the webhook server", s.Start)
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.StartedChecker()(nil) == nil, nil
	}); err != nil {
		t.Fatalf("the server did not start: %v", err)
	}
	return "127.0.0.1:" + strconv.Itoa(port), seen
}

func (p *testPKI) client(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: p.servingCA, MinVersion: tls.VersionTLS12}
	if cert != nil {
		// Sent whatever CAs the server asks for (Certificates would be withheld from a server that
		// does not name their issuer), as a forger would.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// TestServerClientAuthentication: with a client CA, a caller without a certificate the CA signed (or
// whose name is not allowed) fails the handshake and reaches no handler; an allowed one does, and its
// handler sees it authenticated. Without a client CA, anyone is served and nobody is authenticated.
func TestServerClientAuthentication(t *testing.T) {
	p := newTestPKI(t)
	tests := map[string]struct {
		clientCA bool
		names    []string
		cert     *tls.Certificate
		want     *served // nil: refused, no handler ran
	}{
		"client CA, no certificate":               {clientCA: true},
		"client CA, certificate of another CA":    {clientCA: true, cert: &p.clientB},
		"client CA, certificate of the CA":        {clientCA: true, cert: &p.clientA, want: &served{authenticated: true, bodyLen: 4}},
		"names, allowed common name":              {clientCA: true, names: []string{"apiserver"}, cert: &p.clientA, want: &served{authenticated: true, bodyLen: 4}},
		"names, allowed DNS name":                 {clientCA: true, names: []string{"other.example"}, cert: &p.clientA2, want: &served{authenticated: true, bodyLen: 4}},
		"names, name not allowed":                 {clientCA: true, names: []string{"apiserver"}, cert: &p.clientA2},
		"names, allowed name of another CA":       {clientCA: true, names: []string{"apiserver"}, cert: &p.clientB},
		"no client CA, no certificate":            {want: &served{bodyLen: 4}},
		"no client CA, certificate is not asked":  {cert: &p.clientA, want: &served{bodyLen: 4}},
		"no client CA, certificate of another CA": {cert: &p.clientB, want: &served{bodyLen: 4}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var o Options
			if tc.clientCA {
				ca, err := NewClientCA(p.caAFile, ClientCAOptions{Names: tc.names})
				if err != nil {
					t.Fatal(err)
				}
				o.ClientCA = ca
			}
			addr, seen := startServer(t, p, o)
			c := p.client(tc.cert)
			defer c.CloseIdleConnections()
			resp, err := c.Post("https://"+addr+"/echo", "application/json", strings.NewReader("body"))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			if tc.want == nil {
				if err == nil {
					t.Fatalf("served (%s), want a refused handshake", resp.Status)
				}
				select {
				case s := <-seen:
					t.Fatalf("a handler ran: %+v", s)
				default:
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %s", resp.Status)
			}
			if diff := cmp.Diff(*tc.want, <-seen, cmp.AllowUnexported(served{}), cmp.Comparer(func(a, b error) bool { return (a == nil) == (b == nil) })); diff != "" {
				t.Errorf("handler saw (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServerReloadsClientCA: a changed bundle is used at the next handshake; a broken one keeps the
// last good bundle.
func TestServerReloadsClientCA(t *testing.T) {
	p := newTestPKI(t)
	ca, err := NewClientCA(p.caAFile, ClientCAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, p, Options{ClientCA: ca})
	call := func(cert *tls.Certificate) error {
		c := p.client(cert)
		defer c.CloseIdleConnections()
		resp, err := c.Post("https://"+addr+"/echo", "application/json", strings.NewReader("body"))
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return nil
	}
	steps := []struct {
		name     string
		write    []byte
		accepted map[string]bool
		wantErr  bool
	}{
		{"CA A", nil, map[string]bool{"A": true, "B": false}, false},
		{"CA B replaces CA A", p.caBFilePEM, map[string]bool{"A": false, "B": true}, false},
		{"both", append(append([]byte{}, p.caA.PEM...), p.caBFilePEM...), map[string]bool{"A": true, "B": true}, false},
		{"garbage keeps both", []byte("not a certificate"), map[string]bool{"A": true, "B": true}, true},
		{"CA A again", p.caA.PEM, map[string]bool{"A": true, "B": false}, false},
	}
	for _, s := range steps {
		if s.write != nil {
			// A new file renamed into place, as the kubelet swaps a projected volume.
			tmp := p.caAFile + ".new"
			if err := os.WriteFile(tmp, s.write, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, p.caAFile); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]bool{"A": call(&p.clientA) == nil, "B": call(&p.clientB) == nil}
		if diff := cmp.Diff(s.accepted, got); diff != "" {
			t.Errorf("%s: accepted (-want +got):\n%s", s.name, diff)
		}
		if gotErr := ca.LastError() != nil; gotErr != s.wantErr {
			t.Errorf("%s: LastError() = %v, want an error: %v", s.name, ca.LastError(), s.wantErr)
		}
	}
}

// TestServerCutsOffSlowClients: a client that sends its headers, then trickles or stops sending its
// body, is cut off at the read timeout: its handler never gets the whole body, and the connection
// ends without the client finishing.
func TestServerCutsOffSlowClients(t *testing.T) {
	p := newTestPKI(t)
	tests := map[string]struct {
		trickle bool
	}{
		"trickles the body": {trickle: true},
		"stalls mid-body":   {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			addr, seen := startServer(t, p, Options{ReadTimeout: 300 * time.Millisecond})
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.servingCA, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			// A guard against a server that never cuts off: the test fails instead of hanging.
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			const size = 1 << 20
			if _, err := fmt.Fprintf(conn, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"a\":", size); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			writeErr := make(chan error, 1)
			go func() {
				if !tc.trickle {
					writeErr <- nil
					return
				}
				tick := time.NewTicker(10 * time.Millisecond) // the client's pace: one byte per tick
				defer tick.Stop()
				for sent := 5; sent < size; sent++ {
					select {
					case <-stop:
						writeErr <- nil
						return
					case <-tick.C:
					}
					if _, err := conn.Write([]byte(" ")); err != nil {
						writeErr <- err
						return
					}
				}
				writeErr <- errors.New("the whole body was sent")
			}()
			// The server answers the cut-off request (400 from the handler) or closes the connection.
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					t.Errorf("status %s, want the request cut off", resp.Status)
				}
			} else if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the server did not cut the client off: %v", err)
			}
			close(stop)
			if err := <-writeErr; err != nil && err.Error() == "the whole body was sent" {
				t.Fatal(err)
			}
			s := <-seen
			if s.readErr == nil || s.bodyLen >= size {
				t.Errorf("the handler read %d bytes (error %v), want a read cut off before %d", s.bodyLen, s.readErr, size)
			}
		})
	}
}

// TestServerBoundsTheBody: a body over the bound is refused, declared or not.
func TestServerBoundsTheBody(t *testing.T) {
	p := newTestPKI(t)
	const limit = 1024
	tests := map[string]struct {
		size    int
		chunked bool
		want    int
		handler bool
	}{
		"at the bound":            {size: limit, want: http.StatusOK, handler: true},
		"declared over the bound": {size: limit + 1, want: http.StatusRequestEntityTooLarge},
		"chunked over the bound":  {size: 4 * limit, chunked: true, want: http.StatusBadRequest, handler: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			addr, seen := startServer(t, p, Options{MaxRequestBytes: limit})
			c := p.client(nil)
			defer c.CloseIdleConnections()
			var body io.Reader = strings.NewReader(strings.Repeat("x", tc.size))
			if tc.chunked {
				body = io.MultiReader(body) // no length: sent chunked
			}
			resp, err := c.Post("https://"+addr+"/echo", "application/json", body)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
			select {
			case s := <-seen:
				if !tc.handler {
					t.Errorf("a handler ran: %+v", s)
				}
				if s.bodyLen > limit {
					t.Errorf("the handler read %d bytes, over %d", s.bodyLen, limit)
				}
			default:
				if tc.handler {
					t.Error("no handler ran")
				}
			}
		})
	}
}

// TestParseClientCABundle: a bundle must hold at least one certificate, and every certificate block
// must parse; other blocks are skipped.
func TestParseClientCABundle(t *testing.T) {
	ca, err := certs.NewCA("a", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := certs.EncodeKey(ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		data    []byte
		wantErr string
	}{
		"one certificate":      {data: ca.PEM},
		"with a key block":     {data: append(append([]byte{}, key...), ca.PEM...)},
		"empty":                {wantErr: "no PEM certificate"},
		"not PEM":              {data: []byte("hello"), wantErr: "no PEM certificate"},
		"only a key":           {data: key, wantErr: "no PEM certificate"},
		"a broken certificate": {data: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), wantErr: "certificate 1 of the bundle"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseClientCABundle(tc.data)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && !strings.Contains(got, tc.wantErr) {
				t.Errorf("error %q, want one containing %q", got, tc.wantErr)
			}
		})
	}
}

// FuzzParseClientCABundle: any input gives a pool or an error, never a panic, and never both nil.
func FuzzParseClientCABundle(f *testing.F) {
	ca, err := certs.NewCA("a", time.Hour, time.Now())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca.PEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		pool, err := ParseClientCABundle(data)
		if (pool == nil) == (err == nil) {
			t.Fatalf("pool %v, error %v: want exactly one", pool, err)
		}
	})
}
