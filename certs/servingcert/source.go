package servingcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// CertificateSource provides the webhook server's certificate.
type CertificateSource interface {
	// Start keeps the certificate current until ctx ends; every replica runs it.
	Start(ctx context.Context) error
	// GetCertificate is the webhook server's tls.Config.GetCertificate.
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Healthy is nil while the source serves a certificate every webhook configuration trusts.
	Healthy() error
}

var errNoCertificate = errors.New("no serving certificate yet")

// served is the certificate a source serves, and the switch to the next one: a source offers each
// candidate, and served switches to it once the webhook configurations trust it (offer). Both
// sources serve through it.
type served struct {
	// source names the source in the metrics (certs.SourceSecret, certs.SourceSelfSigned).
	source string
	// webhookConfiguration names the configurations that must trust the certificate; empty: none.
	webhookConfiguration string
	env                  *env
	metrics              *Metrics
	clock                clock.Clock

	mu      sync.Mutex
	current *tls.Certificate
	// pending is a certificate waiting to be trusted before it is served.
	pending *tls.Certificate
	// roots: since when the webhook configurations have trusted each CA, as this replica saw them.
	roots roots
	// settle is how long they must have trusted a new certificate's CA before it replaces a
	// trusted one (settleTime).
	settle time.Duration
	// poke wakes the source's loop.
	poke chan struct{}
}

func newServed(source string, e *env, m *Metrics, clk clock.Clock, webhookConfiguration string) *served {
	return &served{source: source, webhookConfiguration: webhookConfiguration, env: e, metrics: m, clock: clk, settle: settleTime, poke: make(chan struct{}, 1)}
}

// GetCertificate serves the current certificate.
func (s *served) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return nil, errNoCertificate
	}
	return s.current, nil
}

// Healthy is nil while the served certificate is trusted by every webhook configuration.
func (s *served) Healthy() error {
	s.mu.Lock()
	cur := s.current
	s.mu.Unlock()
	if cur == nil {
		return errNoCertificate
	}
	return s.trusts(context.Background(), cur)
}

// run watches the Secret and the webhook configurations and runs sync in a loop, woken by their
// changes.
func (s *served) run(ctx context.Context, sync func(context.Context) (time.Time, error)) error {
	if err := s.env.watchAll(ctx, s.poke, s.webhookConfiguration); err != nil {
		return err
	}
	return loop(ctx, s.env.log, s.clock, s.poke, sync)
}

// latest is the certificate a source renews from: the pending one, else the current one.
func (s *served) latest() *tls.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		return s.pending
	}
	return s.current
}

// refresh records what the webhook configurations trust; every sync does (offer reads them only on
// a change).
func (s *served) refresh(ctx context.Context) {
	if s.webhookConfiguration == "" {
		return
	}
	if _, err := s.observe(ctx); err != nil {
		s.env.log.V(1).Info("the webhook configurations cannot be read yet", "reason", err.Error())
	}
}

// offer serves candidate in place of the current certificate when every webhook configuration
// trusts it and, as this replica saw them, has trusted its CA for s.settle, or when they no longer
// trust the current one; otherwise it is kept pending. It returns when a pending candidate's CA will
// have settled (zero: no time of its own; a change of the configurations wakes the loop).
func (s *served) offer(ctx context.Context, candidate *tls.Certificate, why string) time.Time {
	s.mu.Lock()
	cur := s.current
	s.mu.Unlock()
	if cur != nil && string(cur.Leaf.Raw) == string(candidate.Leaf.Raw) {
		return time.Time{}
	}
	if cur != nil && s.trusts(ctx, cur) == nil {
		var wait string
		var at time.Time
		if err := s.trusts(ctx, candidate); err != nil {
			wait = err.Error()
		} else {
			now := s.clock.Now()
			s.mu.Lock()
			// Zero when no single CA that every configuration holds verifies it (each trusts it
			// through another): nothing to wait for.
			at = s.roots.settledAt(now, candidate.Leaf, s.settle)
			s.mu.Unlock()
			if now.Before(at) {
				wait = fmt.Sprintf("the webhook configurations have trusted its CA for less than %s", s.settle)
			}
		}
		if wait != "" {
			s.mu.Lock()
			s.pending = candidate
			s.mu.Unlock()
			s.env.log.V(1).Info("a new serving certificate waits until the webhook configurations trust it", "reason", wait)
			return at
		}
	}
	s.mu.Lock()
	s.current, s.pending = candidate, nil
	s.mu.Unlock()
	s.metrics.NotAfter.Set(float64(candidate.Leaf.NotAfter.Unix()))
	s.metrics.Changes.WithLabelValues(s.source).Inc()
	s.env.log.Info("serving a new certificate", "reason", why, "serial", candidate.Leaf.SerialNumber.Text(16), "notAfter", candidate.Leaf.NotAfter.UTC())
	return time.Time{}
}

// trusts reports whether every webhook of the configurations trusts c; nil when none is configured.
// It records the bundles it reads in s.roots.
func (s *served) trusts(ctx context.Context, c *tls.Certificate) error {
	if s.webhookConfiguration == "" {
		return nil
	}
	bundles, err := s.observe(ctx)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	for _, b := range bundles {
		if err := certs.VerifyBundle(c.Leaf, b.caBundle, now); err != nil {
			return fmt.Errorf("%s %s, webhook %s: %w", b.kind, s.webhookConfiguration, b.webhook, err)
		}
	}
	return nil
}

// observe reads the bundles through the cache and records them in s.roots.
func (s *served) observe(ctx context.Context) ([]webhookBundle, error) {
	bundles, err := readBundles(ctx, s.env.cached, s.webhookConfiguration)
	if err != nil {
		return nil, err
	}
	parsed := make([][]*x509.Certificate, 0, len(bundles))
	for _, b := range bundles {
		cs, _ := certs.ParseCerts(b.caBundle) // one that does not parse holds nothing
		parsed = append(parsed, cs)
	}
	s.mu.Lock()
	s.roots.observe(s.clock.Now(), parsed)
	s.mu.Unlock()
	return bundles, nil
}
