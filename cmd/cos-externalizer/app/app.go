// Package app composes the cos-externalizer manager: its flags, logger, webhooks and controllers.
// cmd/cos-externalizer runs it; the integration tests run the same composition in-process.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/externalize"
	"github.com/cos-externalizer/cos-externalizer/internal/scheme"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// Version is set at build time with -ldflags "-X github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app.Version=...".
var Version = "dev"

// Options are the manager's command-line flags.
type Options struct {
	metricsAddr     string
	probeAddr       string
	leaderElect     bool
	leaderElectNS   string
	systemNamespace string
	logLevel        string
	logFormat       string

	enableWebhooks bool
	webhookHost    string
	webhookPort    int
	webhookCertDir string
	externalize    string
	threshold      int
	maxStoredBytes int
	exemptUsers    string

	maxResolvedBytes int64

	// Clock is the reconciler's clock (tests shift it); nil is the real clock. Not a flag.
	Clock clock.PassiveClock
	// SkipControllerNameValidation lets a process start the manager more than once (tests). Not a flag.
	SkipControllerNameValidation bool

	rollout      bool
	sweepEvery   time.Duration
	sweepGrace   time.Duration
	keepArchived int
}

// Bind registers the flags on fs.
func (o *Options) Bind(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint (/metrics); \"0\" disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the health (/healthz) and readiness (/readyz) endpoints.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the system namespace).")
	fs.StringVar(&o.systemNamespace, "system-namespace", olmv1.DefaultSystemNamespace, "Namespace of the object-data Secrets; an empty ref.namespace means this namespace.")
	fs.StringVar(&o.logLevel, "log-level", "info", "Log level: debug, info, warn or error.")
	fs.StringVar(&o.logFormat, "log-format", "json", "Log format: json or console.")
	fs.BoolVar(&o.enableWebhooks, "enable-webhooks", true, "Serve the admission webhooks.")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "Address the webhook server listens on (default: all).")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the webhook server.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "Directory with the webhook serving certificate (tls.crt, tls.key); default: controller-runtime's.")
	fs.StringVar(&o.externalize, "externalize", string(externalize.ModeOversized), "Externalization policy: always, oversized (specs over --externalize-threshold) or never; the annotation "+externalize.Annotation+" overrides it per ClusterObjectSet.")
	fs.IntVar(&o.threshold, "externalize-threshold", externalize.DefaultThreshold, "Serialized spec size in bytes above which --externalize=oversized moves inline objects into Secrets.")
	fs.IntVar(&o.maxStoredBytes, "max-stored-bytes", webhook.DefaultMaxStoredBytes, "Largest stored ClusterObjectSet the validating webhook admits.")
	fs.BoolVar(&o.rollout, "rollout", true, "Roll ClusterObjectSets out; false is webhook-only mode (Secret ownership and the orphan sweep still run) for clusters where another reconciler rolls out.")
	fs.DurationVar(&o.sweepEvery, "orphan-sweep-interval", time.Minute, "How often orphaned object-data Secrets are swept.")
	fs.DurationVar(&o.sweepGrace, "orphan-grace-period", 5*time.Minute, "Age below which an object-data Secret without its ClusterObjectSet is kept (an admission request may still be in flight).")
	fs.IntVar(&o.keepArchived, "keep-archived-revisions", 5, "Archived revisions kept per owner; older ones are deleted.")
	fs.Int64Var(&o.maxResolvedBytes, "max-resolved-bytes", content.DefaultMaxResolvedBytes, "Largest total of resolved (decompressed) content of the refs of one ClusterObjectSet, every ref counted, that the reconciler rolls out and the webhook compares; past it the ClusterObjectSet is Blocked.")
	fs.StringVar(&o.exemptUsers, "secret-guard-exempt-users", webhook.NamespaceControllerUser, "Comma-separated users that may delete, or change the label and ownerReferences of, object-data Secrets that a live ClusterObjectSet references (the manager itself is always exempt; the default lets the namespace controller empty a namespace being deleted).")
}

// Validate checks the flag values.
func (o *Options) Validate() error {
	var errs []error
	if _, err := zapcore.ParseLevel(o.logLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	if o.logFormat != "json" && o.logFormat != "console" {
		errs = append(errs, fmt.Errorf("--log-format: %q is neither json nor console", o.logFormat))
	}
	if o.systemNamespace == "" {
		errs = append(errs, errors.New("--system-namespace must not be empty"))
	}
	if _, err := externalize.ParseMode(o.externalize); err != nil {
		errs = append(errs, fmt.Errorf("--externalize: %w", err))
	}
	if o.threshold < 0 {
		errs = append(errs, fmt.Errorf("--externalize-threshold: must not be negative, got %d", o.threshold))
	}
	if o.sweepEvery <= 0 {
		errs = append(errs, fmt.Errorf("--orphan-sweep-interval: must be positive, got %s", o.sweepEvery))
	}
	if o.sweepGrace < 0 {
		errs = append(errs, fmt.Errorf("--orphan-grace-period: must not be negative, got %s", o.sweepGrace))
	}
	if o.keepArchived < 0 {
		errs = append(errs, fmt.Errorf("--keep-archived-revisions: must not be negative, got %d", o.keepArchived))
	}
	if o.maxStoredBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-stored-bytes: must be positive, got %d", o.maxStoredBytes))
	}
	if o.maxResolvedBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-resolved-bytes: must be positive, got %d", o.maxResolvedBytes))
	}
	return errors.Join(errs...)
}

// NewLogger builds the zap logger behind logr; keys are stable across releases.
func NewLogger(o *Options) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(o.logLevel)
	if err != nil {
		return nil, err
	}
	cfg := zap.NewProductionConfig()
	if o.logFormat == "console" {
		cfg = zap.NewDevelopmentConfig()
	}
	cfg.Level = zap.NewAtomicLevelAt(level)
	cfg.EncoderConfig.TimeKey = "ts"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return cfg.Build()
}

// cacheOptions keep the manager's memory independent of the cluster's other objects: Secrets only of
// the system namespace carrying the revision-name label; managed objects only when they carry the
// owning-revision label; ClusterObjectSets all.
func cacheOptions(systemNamespace string) cache.Options {
	owning, _ := labels.NewRequirement(controllers.LabelOwningRevision, selection.Exists, nil)
	revision, _ := labels.NewRequirement(olmv1.LabelRevisionName, selection.Exists, nil)
	return cache.Options{
		DefaultLabelSelector: labels.NewSelector().Add(*owning),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{systemNamespace: {}},
				Label:      labels.NewSelector().Add(*revision),
			},
			&olmv1.ClusterObjectSet{}: {Label: labels.Everything()},
		},
	}
}

// Run runs the manager until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o *Options) error {
	log := ctrl.Log.WithName("setup")
	leNS := o.leaderElectNS
	if leNS == "" {
		leNS = o.systemNamespace
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "cos-externalizer.olm.operatorframework.io",
		LeaderElectionNamespace: leNS,
		Cache:                   cacheOptions(o.systemNamespace),
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{
			Host: o.webhookHost, Port: o.webhookPort, CertDir: o.webhookCertDir,
		}),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if o.enableWebhooks {
		mode, _ := externalize.ParseMode(o.externalize)
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

			MaxResolvedBytes: o.maxResolvedBytes,
		}, webhook.DefaultMetrics); err != nil {
			return fmt.Errorf("setting up the webhooks: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}
	reconciler := &controllers.Reconciler{
		Client:          mgr.GetClient(),
		APIReader:       mgr.GetAPIReader(),
		Recorder:        mgr.GetEventRecorder("cos-externalizer"),
		SystemNamespace: o.systemNamespace,
		KeepArchived:    o.keepArchived,
		Rollout:         o.rollout,
		Clock:           o.Clock,

		MaxResolvedBytes:   o.maxResolvedBytes,
		SkipNameValidation: o.SkipControllerNameValidation,
	}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the reconciler: %w", err)
	}
	if err := mgr.Add(&controllers.OrphanSweeper{
		Client: mgr.GetClient(), SystemNamespace: o.systemNamespace, Interval: o.sweepEvery, GracePeriod: o.sweepGrace,
	}); err != nil {
		return err
	}
	log.Info("starting manager", "version", Version, "systemNamespace", o.systemNamespace,
		"metricsBindAddress", o.metricsAddr, "healthProbeBindAddress", o.probeAddr)
	return mgr.Start(ctx)
}
