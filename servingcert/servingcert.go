// Package servingcert serves the webhooks' TLS certificate from the API server, not from files:
//
//   - SourceSecret: a Secret holding tls.crt and tls.key that something else keeps current
//     (cert-manager's Certificate), watched, so a renewed certificate is served within a second,
//     where a mounted Secret reaches the files only on kubelet's next sync (a minute or more).
//   - SourceSelfSigned: no cert-manager. The elected leader keeps a CA in a Secret and injects its
//     bundle into the webhook configurations (caBundle); every replica issues its own serving
//     certificate from that CA, in memory. The rotation policy is certs.CAPolicy and certs.LeafPolicy.
//   - SourceDir: controller-runtime's default, files in --webhook-cert-dir reloaded on change.
//
// Every replica switches to a new certificate only once the webhook configurations trust it and have
// trusted its CA for a moment (settleTime), or when the one it serves is no longer trusted, and is
// ready only while it serves a trusted one.
package servingcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// Where the serving certificate comes from (--webhook-cert-source).
const (
	SourceDir        = "dir"
	SourceSecret     = "secret"
	SourceSelfSigned = "self-signed"
)

// Default names, as config/ installs them.
const (
	DefaultCertSecret           = "cos-externalizer-webhook-cert"
	DefaultCASecret             = "cos-externalizer-webhook-ca"
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
	// Namespace and SecretName: the certificate Secret (SourceSecret) or the CA Secret
	// (SourceSelfSigned).
	Namespace, SecretName string
	// WebhookConfiguration names the MutatingWebhookConfiguration and the
	// ValidatingWebhookConfiguration whose caBundle must trust the served certificate; empty skips
	// the check (and the self-signed mode cannot inject).
	WebhookConfiguration string
	// Hosts are the serving certificate's names (SourceSelfSigned).
	Hosts                    []string
	CALifetime, CertLifetime time.Duration
	// Clock is the loops' clock; nil is the real clock. Not a flag.
	Clock clock.Clock
}

// Validate checks o.
func (o Options) Validate() error {
	var errs []error
	switch o.Source {
	case SourceDir:
		return nil
	case SourceSecret, SourceSelfSigned:
	default:
		return fmt.Errorf("--webhook-cert-source: %q is none of %s, %s and %s", o.Source, SourceDir, SourceSecret, SourceSelfSigned)
	}
	if o.SecretName == "" {
		errs = append(errs, errors.New("--webhook-cert-secret: must not be empty"))
	}
	if o.Source == SourceSelfSigned {
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
	}
	return errors.Join(errs...)
}

// Server provides the webhook server's certificate.
type Server struct {
	opts  Options
	clock clock.Clock
	log   logr.Logger
	cache cache.Cache
	// cached reads the cache (the replica's reads); api reads the API server (the leader's).
	cached, api client.Reader
	cl          client.Client
	rec         events.EventRecorder

	mu      sync.Mutex
	current *tls.Certificate
	// pending is a certificate waiting to be trusted before it is served.
	pending *tls.Certificate
	// roots: since when the webhook configurations have trusted each CA, as this replica saw them.
	roots roots
	// settle is how long they must have trusted a new certificate's CA before it replaces a
	// trusted one (settleTime).
	settle time.Duration

	// poke wakes the replica's loop; pokeCA the leader's.
	poke, pokeCA chan struct{}
}

// New returns a Server for o; Setup wires it into a manager.
func New(o Options) *Server {
	s := &Server{opts: o, clock: o.Clock, log: logr.Discard(), settle: settleTime, poke: make(chan struct{}, 1), pokeCA: make(chan struct{}, 1)}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	return s
}

// TLSOption sets the webhook server's GetCertificate, or nothing for SourceDir.
func (s *Server) TLSOption() func(*tls.Config) {
	return func(c *tls.Config) {
		if s.opts.Source != SourceDir {
			c.GetCertificate = s.GetCertificate
		}
	}
}

// GetCertificate serves the current certificate.
func (s *Server) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return s.current, nil
}

// Setup adds the Server's cache, loops and readiness check to mgr.
func (s *Server) Setup(mgr manager.Manager) error {
	if s.opts.Source == SourceDir {
		return nil
	}
	s.log = ctrl.Log.WithName("serving-certificate")
	s.api, s.cl = mgr.GetAPIReader(), mgr.GetClient()
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
	s.cache, s.cached = c, c
	// Every replica serves, so the cache runs on every replica (a bare cache would wait for the Lease).
	if err := mgr.Add(&runnable{run: c.Start}); err != nil {
		return err
	}
	s.rec = mgr.GetEventRecorder("cos-externalizer")
	if err := mgr.Add(&runnable{run: s.runReplica}); err != nil {
		return err
	}
	if s.opts.Source == SourceSelfSigned {
		if err := mgr.Add(&runnable{run: s.runAuthority, leader: true}); err != nil {
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

// ReadyCheck passes while the served certificate is trusted by every webhook configuration.
func (s *Server) ReadyCheck(*http.Request) error {
	s.mu.Lock()
	cur := s.current
	s.mu.Unlock()
	if cur == nil {
		return errors.New("no serving certificate yet")
	}
	return s.trusts(context.Background(), cur)
}

// watch wakes ch on every change of the cache's objects of obj's kind.
func (s *Server) watch(ctx context.Context, obj client.Object, ch chan struct{}) error {
	inf, err := s.cache.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	wake := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { wake() },
		UpdateFunc: func(any, any) { wake() },
		DeleteFunc: func(any) { wake() },
	})
	return err
}

// offer serves candidate in place of the current certificate when every webhook configuration
// trusts it and, as this replica saw them, has trusted its CA for s.settle, or when they no longer
// trust the current one; otherwise it is kept pending. It returns when a pending candidate's CA will
// have settled (zero: no time of its own; a change of the configurations wakes the loop).
func (s *Server) offer(ctx context.Context, candidate *tls.Certificate, why string) time.Time {
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
			s.log.V(1).Info("a new serving certificate waits until the webhook configurations trust it", "reason", wait)
			return at
		}
	}
	s.mu.Lock()
	s.current, s.pending = candidate, nil
	s.mu.Unlock()
	certNotAfter.Set(float64(candidate.Leaf.NotAfter.Unix()))
	certChanges.WithLabelValues(s.opts.Source).Inc()
	s.log.Info("serving a new certificate", "reason", why, "serial", candidate.Leaf.SerialNumber.Text(16), "notAfter", candidate.Leaf.NotAfter.UTC())
	return time.Time{}
}

// trusts reports whether every webhook of the configurations trusts c; nil when none is configured.
// It records the bundles it reads in s.roots.
func (s *Server) trusts(ctx context.Context, c *tls.Certificate) error {
	if s.opts.WebhookConfiguration == "" {
		return nil
	}
	bundles, err := s.observe(ctx)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	for _, b := range bundles {
		if err := certs.VerifyBundle(c.Leaf, b.caBundle, now); err != nil {
			return fmt.Errorf("%s %s, webhook %s: %w", b.kind, s.opts.WebhookConfiguration, b.webhook, err)
		}
	}
	return nil
}

// observe reads the bundles through the cache and records them in s.roots.
func (s *Server) observe(ctx context.Context) ([]webhookBundle, error) {
	bundles, err := s.bundles(ctx, s.cached)
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

type webhookBundle struct {
	kind, webhook string
	caBundle      []byte
}

// bundles lists the caBundle of every webhook of the two configurations, read through r.
func (s *Server) bundles(ctx context.Context, r client.Reader) ([]webhookBundle, error) {
	var out []webhookBundle
	for _, wc := range s.configurations() {
		if err := r.Get(ctx, types.NamespacedName{Name: s.opts.WebhookConfiguration}, wc.obj); err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", wc.kind, s.opts.WebhookConfiguration, err)
		}
		for _, h := range wc.webhooks() {
			out = append(out, webhookBundle{wc.kind, h.name, h.config.CABundle})
		}
	}
	return out, nil
}

// configuration is one of the two webhook configurations, empty until read into obj.
type configuration struct {
	kind string
	obj  client.Object
	// webhooks are obj's webhooks, pointing into obj.
	webhooks func() []webhookConfig
}

type webhookConfig struct {
	name   string
	config *admissionregistrationv1.WebhookClientConfig
}

// configurations are the mutating and the validating configuration, to be read.
func (s *Server) configurations() []configuration {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	return []configuration{
		{"MutatingWebhookConfiguration", mwc, func() (out []webhookConfig) {
			for i := range mwc.Webhooks {
				out = append(out, webhookConfig{mwc.Webhooks[i].Name, &mwc.Webhooks[i].ClientConfig})
			}
			return out
		}},
		{"ValidatingWebhookConfiguration", vwc, func() (out []webhookConfig) {
			for i := range vwc.Webhooks {
				out = append(out, webhookConfig{vwc.Webhooks[i].Name, &vwc.Webhooks[i].ClientConfig})
			}
			return out
		}},
	}
}

// The serving certificate's metrics; the manager registers them (Collectors).
var (
	certNotAfter = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cos_externalizer_webhook_certificate_expiry_timestamp_seconds",
		Help: "When the webhook serving certificate this replica serves expires (Unix seconds).",
	})
	certChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cos_externalizer_webhook_certificate_changes_total",
		Help: "Serving certificates this replica switched to, by source (secret, self-signed).",
	}, []string{"source"})
)

// Collectors are the serving certificate's metrics, for the manager to register.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{certNotAfter, certChanges}
}
