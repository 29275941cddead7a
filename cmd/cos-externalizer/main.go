// Command cos-externalizer is the manager: it serves health and readiness probes and Prometheus
// metrics, and hosts the externalizing webhook and the companion reconciler of ClusterObjectSets.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/scheme"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// options are the manager's command-line flags.
type options struct {
	metricsAddr     string
	probeAddr       string
	leaderElect     bool
	leaderElectNS   string
	systemNamespace string
	logLevel        string
	logFormat       string
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint (/metrics); \"0\" disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the health (/healthz) and readiness (/readyz) endpoints.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the system namespace).")
	fs.StringVar(&o.systemNamespace, "system-namespace", olmv1.DefaultSystemNamespace, "Namespace of the object-data Secrets; an empty ref.namespace means this namespace.")
	fs.StringVar(&o.logLevel, "log-level", "info", "Log level: debug, info, warn or error.")
	fs.StringVar(&o.logFormat, "log-format", "json", "Log format: json or console.")
}

func (o *options) validate() error {
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
	return errors.Join(errs...)
}

// newLogger builds the zap logger behind logr; keys are stable across releases.
func newLogger(o *options) (*zap.Logger, error) {
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

func main() {
	var o options
	o.bind(flag.CommandLine)
	flag.Parse()
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	zl, err := newLogger(&o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := zapr.NewLogger(zl)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	setupLog := log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		setupLog.Error(err, "loading the kubeconfig")
		os.Exit(1)
	}
	if err := runManager(ctrl.SetupSignalHandler(), cfg, &o); err != nil {
		setupLog.Error(err, "manager stopped")
		_ = zl.Sync()
		os.Exit(1)
	}
	_ = zl.Sync()
}

// runManager runs the manager until ctx ends.
func runManager(ctx context.Context, cfg *rest.Config, o *options) error {
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
	log.Info("starting manager", "version", version, "systemNamespace", o.systemNamespace,
		"metricsBindAddress", o.metricsAddr, "healthProbeBindAddress", o.probeAddr)
	return mgr.Start(ctx)
}
