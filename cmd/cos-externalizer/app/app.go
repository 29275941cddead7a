// Package app composes the cos-externalizer manager: its flags, logger, webhooks and controllers.
// cmd/cos-externalizer runs it; the integration tests run the same composition in-process.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/certs/servingcert"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/webhook"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/deadline"
	"github.com/cos-externalizer/cos-externalizer/webhook/server"
	"github.com/cos-externalizer/cos-externalizer/webhook/unreferenced"
)

// Version is set at build time with -ldflags "-X github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app.Version=...".
var Version = "dev"

// Options are the manager's command-line flags.
type Options struct {
	metricsAddr     string
	metricsSecure   bool
	enableHTTP2     bool
	probeAddr       string
	pprofAddr       string
	leaderElect     bool
	leaderElectNS   string
	systemNamespace string

	enableWebhooks bool
	webhookHost    string
	webhookPort    int
	webhookCertDir string
	certSource     string
	certSecret     string
	webhookConfig  string
	webhookService string
	certHosts      string
	caLifetime     time.Duration
	certLifetime   time.Duration
	externalize    string
	threshold      int
	maxStoredBytes int
	exemptUsers    string

	maxResolvedBytes           int64
	maxConcurrentResolvedBytes int64

	logging   loggingOptions        // logging.go
	lease     leaderElectionOptions // leaderelection.go
	tls       tlsOptions            // tls.go
	memory    memoryOptions         // memlimit.go
	unrefd    unreferencedOptions   // pending.go
	server    webhookServerOptions  // clientauth.go
	admission admissionOptions      // admission.go

	// Clock is the reconciler's clock (tests shift it); nil is the real clock. Not a flag.
	Clock clock.PassiveClock
	// SweepClock is the orphan sweep's clock, on which it measures every grace period and restore
	// window (tests skew it apart from the reconciler's); nil is the real clock. Not a flag.
	SweepClock clock.PassiveClock
	// SweepBeforeDelete, when set (tests), is called by the orphan sweep with the Secrets it is about
	// to delete, after its live confirmation (controllers.OrphanSweeper.BeforeDelete). Not a flag.
	SweepBeforeDelete func(ctx context.Context, secrets []corev1.Secret)
	// SweepAfterStep, when set (tests), is called by the orphan sweep after each of its steps for one
	// Secret; an error stops the sweep there (controllers.OrphanSweeper.AfterStep). Not a flag.
	SweepAfterStep func(ctx context.Context, step string, secret types.NamespacedName) error
	// GuardBeforeAdmitDelete, when set (tests), is called by the Secret guard once it has decided to
	// admit the delete of an object-data Secret and written its quarantine copy, before it answers
	// (webhook.Options.BeforeAdmitDelete). Not a flag.
	GuardBeforeAdmitDelete func(ctx context.Context, secret types.NamespacedName)
	// AdmissionWork, when set (tests: on a fake clock, with work of their own in flight), is the
	// queue of the work the webhooks admit at once, in place of the one --admission-deadline-margin
	// makes; the calls' deadlines are counted on its clock. Not a flag.
	AdmissionWork *deadline.Queue
	// SkipControllerNameValidation lets a process start the manager more than once (tests): the
	// manager's controllers skip the check that their names are unique. Not a flag.
	SkipControllerNameValidation bool

	rollout      string
	sweepEvery   time.Duration
	drainPeriod  time.Duration
	sweepGrace   time.Duration
	sweepRestore time.Duration
	keepArchived int
	driftCheck   time.Duration
	externalRefs time.Duration
}

// Bind registers the flags on fs.
func (o *Options) Bind(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint (/metrics); \"0\" disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, to clients that the API server authenticates (TokenReview) and authorizes (SubjectAccessReview: get on the non-resource URL /metrics); false serves plain HTTP to anyone.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "Serve the webhooks and metrics over HTTP/2 too (off: HTTP/1.1 only, against HTTP/2 stream-reset attacks).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the health (/healthz) and readiness (/readyz) endpoints.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's profiling endpoints (/debug/pprof/), plain HTTP without authentication: bind it to localhost; empty disables them.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the system namespace).")
	o.lease.bind(fs)
	fs.StringVar(&o.systemNamespace, "system-namespace", olmv1.DefaultSystemNamespace, "Namespace of the object-data Secrets; an empty ref.namespace means this namespace.")
	o.logging.bind(fs)
	fs.BoolVar(&o.enableWebhooks, "enable-webhooks", true, "Serve the admission webhooks.")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "Address the webhook server listens on (default: all).")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the webhook server.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "Directory with the webhook serving certificate (tls.crt, tls.key) of --webhook-cert-source=dir; default: controller-runtime's.")
	fs.StringVar(&o.certSource, "webhook-cert-source", certs.SourceDir, "Where the webhook serving certificate comes from: dir (files in --webhook-cert-dir, reloaded on change), secret (the Secret --webhook-cert-secret, e.g. cert-manager's, read through the API server: a renewal is served within a second) or self-signed (the leader keeps a CA in the Secret --webhook-cert-secret and injects it into --webhook-configuration; every replica issues its own certificate).")
	fs.StringVar(&o.certSecret, "webhook-cert-secret", "", "Secret in --system-namespace of --webhook-cert-source=secret (tls.crt, tls.key; default "+certs.DefaultCertSecret+") or self-signed (the CA; default "+certs.DefaultCASecret+").")
	fs.StringVar(&o.webhookConfig, "webhook-configuration", servingcert.DefaultWebhookConfiguration, "Name of the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration whose caBundle must trust the served certificate (readiness; a renewed certificate is served once they trust it); the self-signed mode injects its CA there. Empty: no check.")
	fs.StringVar(&o.webhookService, "webhook-service", "cos-externalizer-webhook", "The webhook Service in --system-namespace: the default host names of the self-signed certificate.")
	fs.StringVar(&o.certHosts, "webhook-cert-hosts", "", "Comma-separated host names and IP addresses of the self-signed serving certificate (default: <webhook-service>.<system-namespace>.svc and .svc.cluster.local).")
	fs.DurationVar(&o.caLifetime, "self-signed-ca-lifetime", servingcert.DefaultCALifetime, "Lifetime of the self-signed CA: a successor is trusted with half of it left and signs with a third left; at least 3 x --self-signed-cert-lifetime.")
	fs.DurationVar(&o.certLifetime, "self-signed-cert-lifetime", servingcert.DefaultCertLifetime, "Lifetime of a replica's self-signed serving certificate (at least "+servingcert.MinCertLifetime.String()+"): renewed with a third of it left.")
	fs.StringVar(&o.externalize, "externalize", string(admission.ModeOversized), "Externalization policy: always, oversized (specs over --externalize-threshold) or never; the annotation "+admission.Annotation+" overrides it per ClusterObjectSet.")
	fs.IntVar(&o.threshold, "externalize-threshold", admission.DefaultThreshold, "Serialized spec size in bytes above which --externalize=oversized moves inline objects into Secrets.")
	fs.IntVar(&o.maxStoredBytes, "max-stored-bytes", webhook.DefaultMaxStoredBytes, "Largest stored ClusterObjectSet the validating webhook admits.")
	fs.StringVar(&o.rollout, "rollout", RolloutAuto, "Roll ClusterObjectSets out: true, false (webhook-only mode: Secret ownership and the orphan sweep still run, for clusters where another reconciler rolls out) or auto (false where OLM rolls ClusterObjectSets out: its ClusterObjectSet CRD, its object-controller Deployment, operator-controller's BoxcutterRuntime gate, its teardown finalizers; true where OLM is absent or does not; an error when unclear).")
	fs.DurationVar(&o.sweepEvery, "orphan-sweep-interval", time.Minute, "How often orphaned object-data Secrets are swept.")
	fs.DurationVar(&o.drainPeriod, "shutdown-drain-period", 3*time.Second, "On SIGTERM, how long the webhooks keep serving while every response closes its connection, so the API server moves its keep-alive connections to the other replicas before this one closes them; 0 stops at once.")
	fs.DurationVar(&o.sweepGrace, "orphan-grace-period", 5*time.Minute, "How long the sweep must have seen an object-data Secret unused (no live ClusterObjectSet references it, none owns it) before it deletes it; writes of the Secret do not restart it.")
	fs.DurationVar(&o.sweepRestore, "orphan-restore-window", 2*time.Minute, "How long the sweep keeps a quarantine copy of each Secret it deleted, and creates the Secret again if a ClusterObjectSet stored meanwhile references it; must exceed the API server's --request-timeout (60s by default).")
	fs.DurationVar(&o.driftCheck, "drift-check-interval", controllers.DefaultDriftCheckInterval, "How often a rolled-out ClusterObjectSet is reconciled without an event (±10%), to restore drift of its objects that no watch event showed; 0 relies on events alone.")
	fs.DurationVar(&o.externalRefs, "external-ref-check-interval", controllers.DefaultExternalRefCheckInterval, "How often a rolled-out or Blocked ClusterObjectSet with refs to Secrets outside --system-namespace (which are not watched) re-reads them and verifies its phase digests (±10%); 0 turns it off.")
	fs.IntVar(&o.keepArchived, "keep-archived-revisions", 5, "Archived revisions kept per owner; older ones are deleted.")
	fs.Int64Var(&o.maxResolvedBytes, "max-resolved-bytes", content.DefaultMaxResolvedBytes, "Largest total of resolved content of the refs of one ClusterObjectSet, every ref counted at its decompressed size or the estimated memory of its parsed object, whichever is larger, that the reconciler rolls out and the webhook compares; past it the ClusterObjectSet is Blocked.")
	fs.Int64Var(&o.maxConcurrentResolvedBytes, "max-concurrent-resolved-bytes", content.DefaultMaxConcurrentResolvedBytes, "Largest total of resolved content (as --max-resolved-bytes counts it) held at once by all reconciles (admission requests have --max-concurrent-admission-bytes); past it a reconcile is retried. At least --max-resolved-bytes.")
	o.tls.bind(fs)
	o.memory.bind(fs)
	o.unrefd.bind(fs)
	o.admission.bind(fs)
	o.server.bind(fs)
	fs.StringVar(&o.exemptUsers, "secret-guard-exempt-users", webhook.NamespaceControllerUser, "Comma-separated users that may delete, or change the label and ownerReferences of, object-data Secrets that a live ClusterObjectSet references (the manager itself is always exempt; the default lets the namespace controller empty a namespace being deleted).")
}

// Validate checks the flag values.
func (o *Options) Validate() error {
	var errs []error
	if err := o.logging.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.lease.validate(); err != nil {
		errs = append(errs, err)
	}
	if o.systemNamespace == "" {
		errs = append(errs, errors.New("--system-namespace must not be empty"))
	}
	if _, err := admission.ParseMode(o.externalize); err != nil {
		errs = append(errs, fmt.Errorf("--externalize: %w", err))
	}
	errs = append(errs, notNegative("--externalize-threshold", o.threshold))
	if o.drainPeriod < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-drain-period: %s is negative", o.drainPeriod))
	}
	errs = append(errs,
		positive("--orphan-sweep-interval", o.sweepEvery),
		notNegative("--orphan-grace-period", o.sweepGrace),
		notNegative("--orphan-restore-window", o.sweepRestore),
		notNegative("--keep-archived-revisions", o.keepArchived),
		notNegative("--external-ref-check-interval", o.externalRefs),
		notNegative("--drift-check-interval", o.driftCheck))
	if o.rollout != RolloutAuto && o.rollout != "true" && o.rollout != "false" {
		errs = append(errs, fmt.Errorf("--rollout: %q is none of true, false and auto", o.rollout))
	}
	errs = append(errs, positive("--max-stored-bytes", o.maxStoredBytes))
	if err := o.servingCert().Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := o.tls.settings(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.server.validate())
	if err := o.memory.validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.unrefd.validate()) // pending.go
	if err := o.admission.validate(o.maxResolvedBytes); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, positive("--max-resolved-bytes", o.maxResolvedBytes))
	if o.maxConcurrentResolvedBytes < o.maxResolvedBytes {
		errs = append(errs, fmt.Errorf("--max-concurrent-resolved-bytes: must be at least --max-resolved-bytes (%d), got %d", o.maxResolvedBytes, o.maxConcurrentResolvedBytes))
	}
	return errors.Join(errs...)
}

// positive is the error of a numeric flag that is not positive; nil when it is.
func positive[T int | int64 | time.Duration](flag string, v T) error {
	if v > 0 {
		return nil
	}
	return fmt.Errorf("%s: must be positive, got %v", flag, v)
}

// notNegative is the error of a numeric flag that is negative; nil when it is not.
func notNegative[T int | int64 | time.Duration](flag string, v T) error {
	if v >= 0 {
		return nil
	}
	return fmt.Errorf("%s: must not be negative, got %v", flag, v)
}

// servingCert is the serving certificate's configuration from the flags.
func (o *Options) servingCert() servingcert.Options {
	sc := servingcert.Options{
		Source: o.certSource, Namespace: o.systemNamespace, SecretName: o.certSecret,
		WebhookConfiguration: o.webhookConfig, CALifetime: o.caLifetime, CertLifetime: o.certLifetime,
	}
	if sc.SecretName == "" {
		sc.SecretName = certs.DefaultCertSecret
		if sc.Source == certs.SourceSelfSigned {
			sc.SecretName = certs.DefaultCASecret
		}
	}
	for _, h := range strings.Split(o.certHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			sc.Hosts = append(sc.Hosts, h)
		}
	}
	if len(sc.Hosts) == 0 && o.webhookService != "" {
		svc := o.webhookService + "." + o.systemNamespace + ".svc"
		sc.Hosts = []string{svc, svc + ".cluster.local"}
	}
	return sc
}

// cacheOptions keep the manager's memory independent of the cluster's other objects and of the bytes
// stored in object-data Secrets: Secrets only of the system namespace carrying the revision-name
// label, and of those only their metadata (secretMetadataOnly); managed objects only when they carry
// the owning-revision label, watched as metadata (managedObjectLean); ClusterObjectSets all, without
// what no reader needs (clusterObjectSetLean).
func cacheOptions(systemNamespace string, measure func(*corev1.Secret)) cache.Options {
	owning, _ := labels.NewRequirement(olmv1.LabelOwningRevision, selection.Exists, nil)
	revision, _ := labels.NewRequirement(olmv1.LabelRevisionName, selection.Exists, nil)
	return cache.Options{
		DefaultLabelSelector: labels.NewSelector().Add(*owning),
		DefaultTransform:     managedObjectLean,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{systemNamespace: {}},
				Label:      labels.NewSelector().Add(*revision),
				Transform:  secretMetadataOnly(measure),
			},
			&olmv1.ClusterObjectSet{}: {Label: labels.Everything(), Transform: clusterObjectSetLean},
		},
	}
}

// The metrics endpoint authenticates and authorizes its clients through the API server:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Run runs the manager until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o *Options) error {
	log := ctrl.Log.WithName("setup")
	drain := &server.Drain{}
	// The manager runs until the drain after the signal is over.
	ctx = drainFirst(ctx, log, clock.RealClock{}, drain, o.drainPeriod)
	rollOut, why, err := DecideRollout(ctx, cfg, o.rollout)
	if err != nil {
		return err
	}
	if err := o.memory.apply(log); err != nil {
		return err
	}
	m, err := processMetrics() // metrics.go
	if err != nil {
		return err
	}
	serving := servingcert.New(o.servingCert(), m.servingCert)
	// The bound on unreferenced Secrets counts them from the cache, their sizes measured as it reads
	// them (pending.go).
	var unref *unreferenced.Bound
	if o.enableWebhooks {
		unref = o.unrefd.ledger()
	}
	mgr, err := o.newManager(cfg, serving, m.webhook, unref)
	if err != nil {
		return err
	}
	// One index on the shared cache serves both of its users: the Secret guard and the reconciler's
	// Secret watch.
	if err := objectdata.IndexRefs(ctx, mgr.GetFieldIndexer(), o.systemNamespace); err != nil {
		return err
	}
	if o.enableWebhooks {
		if err := o.setupWebhooks(ctx, mgr, serving, drain, m.webhook, unref); err != nil {
			return err
		}
	}
	if err := o.setupControllers(mgr, rollOut, m.controllers); err != nil {
		return err
	}
	status := controllers.NewStatusCollector(mgr.GetCache(), o.systemNamespace)
	if err := status.Watch(ctx, mgr.GetCache()); err != nil {
		return err
	}
	if err := m.statusCollector(status); err != nil {
		return err
	}
	o.server.announce(log, o.enableWebhooks && o.webhookPort >= 0, m.webhook.Server) // clientauth.go
	log.Info("starting manager", "version", Version, "systemNamespace", o.systemNamespace, "rollout", rollOut, "rolloutReason", why,
		"webhooks", o.enableWebhooks, "webhookCertSource", o.certSource, "metricsBindAddress", o.metricsAddr, "metricsSecure", o.metricsSecure, "healthProbeBindAddress", o.probeAddr)
	return mgr.Start(ctx)
}

// newManager creates the manager, its metrics and webhook servers serving over TLS as the flags say
// (the webhook server with serving's certificate, its client CA counted in webhookMetrics), with its
// health and readiness checks; the cache measures Secrets for unref (nil: no webhooks).
func (o *Options) newManager(cfg *rest.Config, serving *servingcert.Server, webhookMetrics *webhook.Metrics, unref *unreferenced.Bound) (ctrl.Manager, error) {
	tlsSettings, err := o.tls.settings()
	if err != nil {
		return nil, err
	}
	tlsOpts := []func(*tls.Config){tlsSettings.Apply}
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	webhookTLSOpts := append(append([]func(*tls.Config){}, tlsOpts...), serving.TLSOption())
	webhookServer, err := o.server.server(o.webhookHost, o.webhookPort, o.webhookCertDir, webhookTLSOpts, webhookMetrics.Server) // clientauth.go
	if err != nil {
		return nil, err
	}
	leNS := o.leaderElectNS
	if leNS == "" {
		leNS = o.systemNamespace
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 o.metricsServer(tlsOpts, webhookTLSOpts),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        olmv1.LeaderElectionLease,
		LeaderElectionNamespace: leNS,
		// A stopping leader gives the Lease up, so the next replica takes over at once instead of
		// after the lease duration (safe: the process exits when the manager returns).
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOptions(o.systemNamespace, unref.RecordSize),
		// Managed objects are read through the cache too (the reconciler's settled reconciles make no
		// API request); the cache holds only those carrying the owning-revision label.
		Client:        client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		WebhookServer: webhookServer,
		Controller:    config.Controller{SkipNameValidation: ptr.To(o.SkipControllerNameValidation)},
	}
	o.lease.apply(&mgrOpts)
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// metricsServer is the metrics endpoint's configuration: tlsOpts, or with the webhooks webhookTLSOpts.
func (o *Options) metricsServer(tlsOpts, webhookTLSOpts []func(*tls.Config)) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure, TLSOpts: tlsOpts}
	if o.enableWebhooks {
		// The metrics endpoint serves the webhooks' certificate, which a scraper verifies with the CA of
		// its Secret (config/prometheus); without webhooks, controller-runtime's self-signed one.
		opts.TLSOpts = webhookTLSOpts
		if o.certSource == certs.SourceDir {
			opts.CertDir = o.webhookCertDir
			if opts.CertDir == "" {
				opts.CertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs") // controller-runtime's default
			}
		}
	}
	if o.metricsSecure {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}

// setupWebhooks registers the webhooks, counted in metrics, and the serving certificate.
func (o *Options) setupWebhooks(ctx context.Context, mgr ctrl.Manager, serving *servingcert.Server, drain *server.Drain, metrics *webhook.Metrics, unref *unreferenced.Bound) error {
	mode, _ := admission.ParseMode(o.externalize)
	var exempt []string
	for _, u := range strings.Split(o.exemptUsers, ",") {
		if u = strings.TrimSpace(u); u != "" {
			exempt = append(exempt, u)
		}
	}
	if err := webhook.Setup(ctx, mgr, webhook.Options{
		SystemNamespace: o.systemNamespace,
		Mode:            mode,
		Threshold:       o.threshold,
		MaxStoredBytes:  o.maxStoredBytes,
		ExemptUsers:     exempt,
		// The secret guard's exemption lives in its matchConditions; checked against the flag.
		WebhookConfiguration: o.webhookConfig,

		MaxResolvedBytes: o.maxResolvedBytes,
		InFlight:         o.admission.inFlight(o.AdmissionWork), // its own pool: admission never holds up the reconciler
		Drain:            drain,
		Unreferenced:     unref, // pending.go

		BeforeAdmitDelete: o.GuardBeforeAdmitDelete, // tests only
	}, metrics); err != nil {
		return fmt.Errorf("setting up the webhooks: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if err := o.server.watchCallers(ctx, mgr, metrics.Server); err != nil { // clientauth.go
		return err
	}
	if err := serving.Setup(mgr); err != nil {
		return fmt.Errorf("setting up the serving certificate: %w", err)
	}
	return nil
}

// setupControllers registers the controllers, counted in metrics: the rollout, or where rollOut is
// false the finalizer release; Secret ownership and the orphan sweep.
func (o *Options) setupControllers(mgr ctrl.Manager, rollOut bool, metrics *controllers.Metrics) error {
	if rollOut {
		if err := (&controllers.ClusterObjectSetReconciler{
			Client:           mgr.GetClient(),
			APIReader:        mgr.GetAPIReader(),
			Recorder:         mgr.GetEventRecorder("cos-externalizer"),
			SystemNamespace:  o.systemNamespace,
			KeepArchived:     o.keepArchived,
			DriftCheck:       o.driftCheck,
			ExternalRefCheck: o.externalRefs,
			Clock:            o.Clock,

			// --max-resolved-bytes, the webhooks' bound too, drawn from the reconciler's own pool; the
			// webhooks draw from theirs (o.admission).
			Resolve: secretdata.ResolveMemory{MaxResolvedBytes: o.maxResolvedBytes}.WithPool(content.NewPool(o.maxConcurrentResolvedBytes)),
			Metrics: metrics,
		}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the rollout: %w", err)
		}
	} else if err := (&controllers.FinalizerReleaseReconciler{
		// Webhook-only: another reconciler rolls out; only our own teardown finalizer is let go.
		Client: mgr.GetClient(),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the finalizer release: %w", err)
	}
	// Secret ownership runs whether or not this manager rolls out: who owns an object-data Secret
	// follows who uses it (internal/secretuse).
	if err := (&controllers.SecretOwnershipReconciler{
		Client: mgr.GetClient(), SystemNamespace: o.systemNamespace, Metrics: metrics,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up Secret ownership: %w", err)
	}
	return mgr.Add(&controllers.OrphanSweeper{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), SystemNamespace: o.systemNamespace, Interval: o.sweepEvery, GracePeriod: o.sweepGrace,
		RestoreWindow: o.sweepRestore, Recorder: mgr.GetEventRecorder("cos-externalizer"),
		Clock: o.SweepClock, BeforeDelete: o.SweepBeforeDelete, AfterStep: o.SweepAfterStep, Metrics: metrics,
	})
}
