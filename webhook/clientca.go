package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
)

// ClientCA authenticates the callers of the webhook server: a handshake must present a client
// certificate that a CA of the PEM bundle at Path signed for client authentication, and, when Names
// is not empty, whose common name or one of whose DNS names is in Names. Anything else fails the
// handshake, before any request is read, so no handler runs for it.
//
// The bundle is re-read when the file changes (its size, modification time or identity, as a
// kubelet-projected Secret or ConfigMap swaps it), checked at the next handshake; a file that has
// become unreadable or holds no certificate keeps the last good bundle (LastError tells why).
type ClientCA struct {
	path  string
	names []string

	mu      sync.Mutex
	stat    os.FileInfo
	pem     []byte
	pool    *x509.CertPool
	lastErr error
}

// NewClientCA loads the bundle at path; an unreadable file, or one without a single PEM certificate,
// is an error.
func NewClientCA(path string, names []string) (*ClientCA, error) {
	c := &ClientCA{path: path, names: slices.Clone(names)}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("client CA bundle: %w", err)
	}
	if err := c.load(fi); err != nil {
		return nil, err
	}
	return c, nil
}

// ParseClientCABundle parses a PEM bundle of CA certificates; it is an error when it holds none, or a
// block that is not a valid certificate.
func ParseClientCABundle(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the bundle: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate (BEGIN CERTIFICATE) in the bundle")
	}
	return pool, nil
}

// load reads the file whose stat is fi; on error the current bundle stays.
func (c *ClientCA) load(fi os.FileInfo) error {
	data, err := os.ReadFile(c.path)
	if err == nil && c.pem != nil && bytes.Equal(data, c.pem) {
		c.stat = fi
		return nil
	}
	var pool *x509.CertPool
	if err == nil {
		pool, err = ParseClientCABundle(data)
	}
	if err != nil {
		err = fmt.Errorf("client CA bundle %s: %w", c.path, err)
		c.lastErr = err
		return err
	}
	c.stat, c.pem, c.pool, c.lastErr = fi, data, pool, nil
	return nil
}

// current returns the pool, re-read first when the file changed.
func (c *ClientCA) current() *x509.CertPool {
	c.mu.Lock()
	defer c.mu.Unlock()
	fi, err := os.Stat(c.path)
	switch {
	case err != nil:
		c.lastErr = fmt.Errorf("client CA bundle: %w", err)
	case c.stat == nil || !os.SameFile(fi, c.stat) || fi.Size() != c.stat.Size() || !fi.ModTime().Equal(c.stat.ModTime()):
		_ = c.load(fi) // kept in lastErr; the last good bundle stays
	}
	return c.pool
}

// LastError is why the last reload failed (the last good bundle is in use), or nil.
func (c *ClientCA) LastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// TLSOption makes a server's tls.Config require and verify a client certificate against the current
// bundle on every handshake. It clones the configuration being built, with every option applied
// before and after it, so it works with any source of the serving certificate. Session tickets are
// off: a resumed session would skip the verification against a rotated bundle.
func (c *ClientCA) TLSOption() func(*tls.Config) {
	return func(base *tls.Config) {
		prev := base.GetConfigForClient
		base.SessionTicketsDisabled = true
		// Never used while GetConfigForClient answers; should it be, nothing verifies.
		base.ClientAuth, base.ClientCAs = tls.RequireAndVerifyClientCert, x509.NewCertPool()
		base.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cfg := base
			if prev != nil {
				got, err := prev(hello)
				if err != nil {
					return nil, err
				}
				if got != nil {
					cfg = got
				}
			}
			cfg = cfg.Clone()
			cfg.GetConfigForClient = nil
			cfg.SessionTicketsDisabled = true
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
			cfg.ClientCAs = c.current()
			if len(c.names) > 0 {
				cfg.VerifyConnection = c.verifyName
			}
			return cfg, nil
		}
	}
}

// verifyName accepts a verified client certificate whose common name or a DNS name is allowed.
func (c *ClientCA) verifyName(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("no client certificate")
	}
	if AllowedClientName(cs.PeerCertificates[0], c.names) {
		return nil
	}
	return errors.New("the client certificate's name is not among --webhook-client-names")
}

// AllowedClientName reports whether cert's common name or one of its DNS names is in names; empty
// names allow any certificate.
func AllowedClientName(cert *x509.Certificate, names []string) bool {
	if len(names) == 0 {
		return true
	}
	if slices.Contains(names, cert.Subject.CommonName) {
		return true
	}
	for _, n := range cert.DNSNames {
		if slices.Contains(names, n) {
			return true
		}
	}
	return false
}
