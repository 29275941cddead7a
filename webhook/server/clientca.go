package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/callerwatch"
)

// DefaultClientCAPollInterval is how often ClientCA.Run looks at the bundle's file when no handshake
// does.
const DefaultClientCAPollInterval = 10 * time.Second

// ClientCAOptions configure NewClientCA.
type ClientCAOptions struct {
	// Names, when not empty, are the common names or DNS names one of which a client certificate must
	// carry (--webhook-client-names).
	Names []string
	// Metrics, when set, get the bundle's expiry and its reload failures.
	Metrics *Metrics
	// Clock is the time certificates are verified at and the bundle polled by; nil is the real clock.
	Clock clock.WithTicker
	// PollInterval is how often Run looks at the file (0: DefaultClientCAPollInterval).
	PollInterval time.Duration
	// Callers, when set, records each handshake and each request whose certificate verified, for the
	// readiness check that says when the API server's calls are refused (callerwatch).
	Callers *callerwatch.Watch
	// Log gets a reload's failure, once per version of the file, and a pooled connection refused;
	// the zero Logger is controller-runtime's, named webhook-client-ca.
	Log logr.Logger
}

// ClientCA authenticates the callers of the webhook server: a handshake must present a client
// certificate that a CA of the PEM bundle at path signed for client authentication, and, when Names
// is not empty, whose common name or one of whose DNS names is in Names. Anything else fails the
// handshake, before any request is read, so no handler runs for it. Every request is checked again
// against the bundle as it is then (Reverify): a kept-alive connection whose certificate the current
// bundle no longer verifies (the CA rotated away, the certificate expired) is refused and closed.
//
// The bundle is re-read when the file changes (its size, modification time or identity, as a
// kubelet-projected Secret or ConfigMap swaps it), looked at on every handshake and request and every
// PollInterval (Run). A file that has become unreadable, empty or not PEM keeps the last good bundle:
// the failure is logged and counted once per version of the file (Metrics), and LastError tells why.
type ClientCA struct {
	path  string
	names []string
	clock clock.WithTicker
	poll  time.Duration
	log   logr.Logger
	m     *Metrics
	calls *callerwatch.Watch

	mu      sync.Mutex
	stat    os.FileInfo
	pem     []byte
	pool    *x509.CertPool
	gen     uint64 // counts the bundles loaded
	lastErr error
	// failed is the version of the file whose failure was reported (nil: none), or failedStat the
	// error reading its metadata.
	failed     os.FileInfo
	failedStat string
}

// NewClientCA loads the bundle at path; an unreadable file, or one without a single PEM certificate,
// is an error.
func NewClientCA(path string, o ClientCAOptions) (*ClientCA, error) {
	c := &ClientCA{path: path, names: slices.Clone(o.Names), clock: o.Clock, poll: o.PollInterval, log: o.Log, m: o.Metrics, calls: o.Callers}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.poll <= 0 {
		c.poll = DefaultClientCAPollInterval
	}
	if c.log.GetSink() == nil {
		c.log = ctrl.Log.WithName("webhook-client-ca")
	}
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
	pool, _, err := parseClientCABundle(data)
	return pool, err
}

// parseClientCABundle is ParseClientCABundle, with the earliest expiry of the bundle's certificates.
func parseClientCABundle(data []byte) (*x509.CertPool, time.Time, error) {
	pool := x509.NewCertPool()
	var earliest time.Time
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
			return nil, time.Time{}, fmt.Errorf("certificate %d of the bundle: %w", n+1, err)
		}
		pool.AddCert(cert)
		if earliest.IsZero() || cert.NotAfter.Before(earliest) {
			earliest = cert.NotAfter
		}
		n++
	}
	if n == 0 {
		return nil, time.Time{}, errors.New("no PEM certificate (BEGIN CERTIFICATE) in the bundle")
	}
	return pool, earliest, nil
}

// load reads the file whose stat is fi; on error the current bundle stays, and the error is
// reported when this version of the file has not been.
func (c *ClientCA) load(fi os.FileInfo) error {
	data, err := os.ReadFile(c.path)
	if err == nil && c.pem != nil && bytes.Equal(data, c.pem) {
		c.stat = fi
		c.recoveredLocked()
		return nil
	}
	var pool *x509.CertPool
	var expiry time.Time
	if err == nil {
		pool, expiry, err = parseClientCABundle(data)
	}
	if err != nil {
		err = fmt.Errorf("client CA bundle %s: %w", c.path, err)
		c.lastErr = err
		if c.pool != nil && !sameVersion(c.failed, fi) {
			c.failed, c.failedStat = fi, ""
			c.reportLocked(err)
		}
		return err
	}
	c.stat, c.pem, c.pool = fi, data, pool
	c.gen++
	c.recoveredLocked()
	if c.m != nil {
		c.m.ClientCAExpiry.Set(float64(expiry.Unix()))
	}
	if c.gen > 1 {
		c.log.Info("loaded a new client CA bundle", "path", c.path, "earliestExpiry", expiry.UTC().Format(time.RFC3339))
	}
	return nil
}

// reportLocked logs and counts a failed reload: the last good bundle stays in use.
func (c *ClientCA) reportLocked(err error) {
	c.log.Error(err, "the client CA bundle cannot be loaded: the last good bundle stays in use, and a restart would fail until the file is fixed", "path", c.path)
	if c.m != nil {
		c.m.ClientCAReloadFailures.Inc()
		c.m.ClientCAReloadFailing.Set(1)
	}
}

// recoveredLocked records that the file is loaded as it is.
func (c *ClientCA) recoveredLocked() {
	if c.failed != nil || c.failedStat != "" {
		c.log.Info("the client CA bundle loads again", "path", c.path)
	}
	c.lastErr, c.failed, c.failedStat = nil, nil, ""
	if c.m != nil {
		c.m.ClientCAReloadFailing.Set(0)
	}
}

// sameVersion reports whether two stats are of the same version of a file: the same file, size and
// modification time.
func sameVersion(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// check re-reads the file when it changed.
func (c *ClientCA) checkLocked() {
	fi, err := os.Stat(c.path)
	switch {
	case err != nil:
		err = fmt.Errorf("client CA bundle: %w", err)
		c.lastErr = err
		if c.failedStat != err.Error() {
			c.failed, c.failedStat = nil, err.Error()
			c.reportLocked(err)
		}
	case !sameVersion(fi, c.stat):
		_ = c.load(fi) // kept in lastErr; the last good bundle stays
	}
}

// current returns the pool and its generation, re-read first when the file changed.
func (c *ClientCA) current() (*x509.CertPool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkLocked()
	return c.pool, c.gen
}

// Run looks at the file every PollInterval until ctx ends, so that a broken file is reported while
// no handshake comes.
func (c *ClientCA) Run(ctx context.Context) {
	t := c.clock.NewTicker(c.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.mu.Lock()
			c.checkLocked()
			c.mu.Unlock()
		}
	}
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
			c.calls.Handshake()
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
			cfg.ClientCAs, _ = c.current()
			cfg.Time = c.clock.Now
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

// verify checks a client certificate chain as a handshake received it (the leaf first) against the
// current bundle at the clock's time, and its name; it returns the bundle's generation and the end
// of the chain's validity.
func (c *ClientCA) verify(chain []*x509.Certificate) (uint64, time.Time, error) {
	pool, gen := c.current()
	if len(chain) == 0 {
		return gen, time.Time{}, errors.New("no client certificate")
	}
	intermediates := x509.NewCertPool()
	for _, cert := range chain[1:] {
		intermediates.AddCert(cert)
	}
	chains, err := chain[0].Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: intermediates, CurrentTime: c.clock.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return gen, time.Time{}, err
	}
	if !AllowedClientName(chain[0], c.names) {
		return gen, time.Time{}, errors.New("the client certificate's name is not among --webhook-client-names")
	}
	var until time.Time
	for _, cert := range chains[0] {
		if until.IsZero() || cert.NotAfter.Before(until) {
			until = cert.NotAfter
		}
	}
	return gen, until, nil
}

// connVerification is what Reverify last found of one connection's client certificate.
type connVerification struct {
	mu sync.Mutex
	// gen and until: verified against the bundle of generation gen, valid until until.
	gen     uint64
	until   time.Time
	refused bool // logged once per connection
}

// connVerificationKey is the context key of a connection's connVerification.
type connVerificationKey struct{}

// withConnVerification gives each connection's requests one connVerification (the server's
// ConnContext).
func withConnVerification(ctx context.Context) context.Context {
	return context.WithValue(ctx, connVerificationKey{}, &connVerification{})
}

// Reverify serves a request only when its connection's client certificate verifies against the
// bundle as it is now: the handshake verified it against the bundle of its time, and a kept-alive
// connection outlives a rotation. One that no longer verifies is refused (403) and its connection
// closed, so that the caller's next request makes a new handshake; it is counted as a refusal with
// reason client_certificate. A connection's verification is kept until the bundle changes or the
// chain expires.
func (c *ClientCA) Reverify(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cv, _ := r.Context().Value(connVerificationKey{}).(*connVerification)
		if cv == nil {
			cv = &connVerification{}
		}
		var chain []*x509.Certificate
		if r.TLS != nil {
			chain = r.TLS.PeerCertificates
		}
		cv.mu.Lock()
		_, gen := c.current()
		ok := cv.gen == gen && c.clock.Now().Before(cv.until)
		var err error
		if !ok {
			var until time.Time
			gen, until, err = c.verify(chain)
			if err == nil {
				cv.gen, cv.until = gen, until
			}
		}
		logIt := err != nil && !cv.refused
		if err != nil {
			cv.refused = true
		}
		cv.mu.Unlock()
		if err != nil {
			if logIt {
				c.log.Error(err, "refused a request: its connection's client certificate does not verify against the current client CA bundle; closing the connection",
					"remoteAddr", r.RemoteAddr)
			}
			if c.m != nil {
				c.m.Refusals.WithLabelValues(string(cosadmission.ReasonClientCertificate)).Inc()
			}
			w.Header().Set("Connection", "close")
			http.Error(w, "the client certificate of this connection is not trusted by the current client CA bundle: reconnect", http.StatusForbidden)
			return
		}
		c.calls.Authenticated()
		h.ServeHTTP(w, r)
	})
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
