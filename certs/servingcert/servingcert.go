// Package servingcert serves the webhooks' TLS certificate from the API server, not from files. Each
// --webhook-cert-source is a CertificateSource of its own type (after cert-manager's pkg/server/tls):
//
//   - SecretSource: a Secret holding tls.crt and tls.key that something else keeps current
//     (cert-manager's Certificate), watched, so a renewed certificate is served within a second,
//     where a mounted Secret reaches the files only on kubelet's next sync (a minute or more).
//   - SelfSignedSource: no cert-manager. The elected leader keeps a CA in a Secret and injects its
//     bundle into the webhook configurations (caBundle; SelfSignedSource.Authority); every replica
//     issues its own serving certificate from that CA, in memory. The rotation policy is
//     certs.CAPolicy and certs.LeafPolicy.
//   - none for certs.SourceDir: controller-runtime's default, files in --webhook-cert-dir reloaded on change.
//
// Both sources offer their candidates to the same switch (served): a replica switches to a new
// certificate only once the webhook configurations trust it and have trusted its CA for a moment
// (settleTime), or when the one it serves is no longer trusted, and is ready only while it serves a
// trusted one.
package servingcert

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/internal/metric"
)

// Default names, as config/ installs them (the Secrets' names are in package certs, with the
// sources).
const (
	DefaultWebhookConfiguration = "cos-externalizer"
	DefaultCALifetime           = 365 * 24 * time.Hour
	DefaultCertLifetime         = 7 * 24 * time.Hour
	// MinCertLifetime is the shortest --self-signed-cert-lifetime: a certificate is renewed with a
	// third of it left, and that window must hold more than minSyncInterval.
	MinCertLifetime = 5 * time.Second
)

// Event reasons, on the CA Secret of the self-signed mode.
const (
	EventCARotated  = "CARotated"
	EventCAInjected = "CAInjected"
	EventCAInvalid  = "CAInvalid"
)

// Options configure the serving certificate.
type Options struct {
	Source string
	// Namespace and SecretName: the certificate Secret (certs.SourceSecret) or the CA Secret
	// (certs.SourceSelfSigned).
	Namespace, SecretName string
	// WebhookConfiguration names the MutatingWebhookConfiguration and the
	// ValidatingWebhookConfiguration whose caBundle must trust the served certificate; empty skips
	// the check (and the self-signed mode cannot inject).
	WebhookConfiguration string
	// Hosts are the serving certificate's names (certs.SourceSelfSigned).
	Hosts                    []string
	CALifetime, CertLifetime time.Duration
	// Clock is the loops' clock; nil is the real clock. Not a flag.
	Clock clock.Clock
}

// Validate checks o.
func (o Options) Validate() error {
	switch o.Source {
	case certs.SourceDir:
		return nil
	case certs.SourceSecret:
		return o.validateSecret()
	case certs.SourceSelfSigned:
		return errors.Join(o.validateSecret(), o.validateSelfSigned())
	}
	return fmt.Errorf("--webhook-cert-source: %q is none of %s, %s and %s", o.Source, certs.SourceDir, certs.SourceSecret, certs.SourceSelfSigned)
}

func (o Options) validateSecret() error {
	if o.SecretName == "" {
		return errors.New("--webhook-cert-secret: must not be empty")
	}
	return nil
}

func (o Options) validateSelfSigned() error {
	var errs []error
	if o.WebhookConfiguration == "" {
		errs = append(errs, errors.New("--webhook-configuration: the self-signed mode injects its CA there, so it must not be empty"))
	}
	if len(o.Hosts) == 0 {
		errs = append(errs, errors.New("--webhook-cert-hosts: the self-signed mode needs at least one host name"))
	}
	if o.CertLifetime < MinCertLifetime {
		errs = append(errs, fmt.Errorf("--self-signed-cert-lifetime (%s) must be at least %s: a certificate is renewed with a third of it left", o.CertLifetime, MinCertLifetime))
	}
	// A CA signs until it has SigningLeft; a certificate it signs must not outlive it.
	if o.CertLifetime > (certs.CAPolicy{Lifetime: o.CALifetime}).SigningLeft() {
		errs = append(errs, fmt.Errorf("--self-signed-ca-lifetime (%s) must be at least 3 x --self-signed-cert-lifetime (%s): a CA signs until a third of its lifetime is left, and the certificates it signs must not outlive it", o.CALifetime, o.CertLifetime))
	}
	return errors.Join(errs...)
}

// Server wires the serving certificate's source into a manager.
type Server struct {
	opts Options
	// src is nil for certs.SourceDir.
	src CertificateSource
	// env is what src reads and writes through; Setup fills it.
	env *env
}

// New returns a Server for o, with o.Source's CertificateSource counted in m; Setup wires it into a
// manager.
func New(o Options, m *Metrics) *Server {
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	s := &Server{opts: o, env: &env{log: logr.Discard()}}
	secret := types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}
	switch o.Source {
	case certs.SourceSecret:
		s.src = newSecretSource(s.env, m, clk, secret, o.WebhookConfiguration)
	case certs.SourceSelfSigned:
		s.src = newSelfSignedSource(s.env, m, clk, secret, o.WebhookConfiguration,
			certs.CAPolicy{CommonName: caCommonName, Lifetime: o.CALifetime}, certs.LeafPolicy{Hosts: o.Hosts, Lifetime: o.CertLifetime})
	}
	return s
}

// TLSOption sets the webhook server's GetCertificate to the source's, or nothing for certs.SourceDir.
func (s *Server) TLSOption() func(*tls.Config) {
	return func(c *tls.Config) {
		if s.src != nil {
			c.GetCertificate = s.src.GetCertificate
		}
	}
}

// Setup adds the source's cache, its loops and its readiness check to mgr.
func (s *Server) Setup(mgr manager.Manager) error {
	if s.src == nil {
		return nil
	}
	s.env.log = ctrl.Log.WithName("serving-certificate")
	s.env.api, s.env.cl = mgr.GetAPIReader(), mgr.GetClient()
	byObject := map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{s.opts.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", s.opts.SecretName),
		},
	}
	if s.opts.WebhookConfiguration != "" {
		name := fields.OneTermEqualSelector("metadata.name", s.opts.WebhookConfiguration)
		byObject[&admissionregistrationv1.MutatingWebhookConfiguration{}] = cache.ByObject{Field: name}
		byObject[&admissionregistrationv1.ValidatingWebhookConfiguration{}] = cache.ByObject{Field: name}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), ByObject: byObject,
	})
	if err != nil {
		return fmt.Errorf("creating the serving certificate's cache: %w", err)
	}
	s.env.cache, s.env.cached = c, c
	s.env.rec = mgr.GetEventRecorder("cos-externalizer")
	// Every replica serves, so the cache and the source run on every replica (a bare runnable would
	// wait for the Lease); a source's authority only on the leader.
	runnables := []manager.Runnable{&runnable{run: c.Start}, &runnable{run: s.src.Start}}
	if a, ok := s.src.(interface{ Authority() manager.Runnable }); ok {
		runnables = append(runnables, a.Authority())
	}
	for _, r := range runnables {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	return mgr.AddReadyzCheck("serving-certificate", s.ReadyCheck)
}

// runnable runs on every replica, or only on the elected leader.
type runnable struct {
	run    func(context.Context) error
	leader bool
}

func (r *runnable) Start(ctx context.Context) error { return r.run(ctx) }
func (r *runnable) NeedLeaderElection() bool        { return r.leader }

// ReadyCheck passes while the source serves a certificate every webhook configuration trusts.
func (s *Server) ReadyCheck(*http.Request) error {
	if s.src == nil {
		return nil
	}
	return s.src.Healthy()
}

// Metrics are the serving certificate's metrics; the manager creates them once and registers them
// (Collectors).
type Metrics struct {
	NotAfter prometheus.Gauge
	Changes  *prometheus.CounterVec
}

// NewMetrics creates the metrics, unregistered (tests use their own).
func NewMetrics() *Metrics {
	return &Metrics{
		NotAfter: metric.Gauge("cos_externalizer_webhook_certificate_expiry_timestamp_seconds", "When the webhook serving certificate this replica serves expires (Unix seconds)."),
		Changes:  metric.CounterVec("cos_externalizer_webhook_certificate_changes_total", "Serving certificates this replica switched to, by source (secret, self-signed).", "source"),
	}
}

// Collectors are m's metrics, for the manager to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.NotAfter, m.Changes}
}
