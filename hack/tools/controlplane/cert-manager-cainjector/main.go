// Command cert-manager-cainjector is a build recipe, not project code: cert-manager's cainjector at the
// version pinned in ../go.mod. cert-manager's own cmd/cainjector module is not served by the Go module
// proxy, so this main wires the library the way that command does (cmd/cainjector/app.Run): a
// controller-runtime manager on which cainjector.RegisterAllInjectors sets up one reconciler per
// injectable kind. With upstream's defaults, it fills the caBundle of MutatingWebhookConfigurations,
// ValidatingWebhookConfigurations, CustomResourceDefinitions (conversion webhook) and APIServices
// annotated cert-manager.io/inject-ca-from (<namespace>/<Certificate>),
// cert-manager.io/inject-ca-from-secret (<namespace>/<Secret>, which must be annotated
// cert-manager.io/allow-direct-injection: "true") or cert-manager.io/inject-apiserver-ca.
//
// What differs from the real command, on purpose: no leader election, and no metrics, health or
// profiling server, so nothing listens on a port and several local control planes can run side by
// side on one machine. SIGTERM or SIGINT stops the manager and the command exits 0 (a second signal
// kills it).
//
// Flags: --kubeconfig (registered by controller-runtime on the global FlagSet; empty means KUBECONFIG,
// in-cluster or ~/.kube/config) and klog's flags (-v etc.).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
)

func main() {
	klog.InitFlags(nil)
	flag.Parse()

	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	go func() { <-ctx.Done(); stop() }() // a second signal terminates at once
	ctx = logf.NewContext(ctx, logf.Log, "cainjector")

	if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		logf.Log.Error(err, "cert-manager cainjector failed")
		logf.FlushLogs()
		os.Exit(1)
	}
	logf.Log.Info("cainjector stopped")
}

func run(ctx context.Context) error {
	restConfig, err := config.GetConfig() // --kubeconfig
	if err != nil {
		return err
	}
	restConfig = util.RestConfigWithUserAgent(restConfig, "cainjector")

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(apiregistrationv1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true},
		// As upstream: Secrets are read from the API server, not cached (the injectors watch their
		// metadata only).
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: "0"}, // off
		HealthProbeBindAddress: "0",                                     // off
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	// The Certificate data source watches Certificates: wait for their CRD, as upstream does.
	direct, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := direct.Get(ctx, types.NamespacedName{Name: "certificates.cert-manager.io"}, &apiextensionsv1.CustomResourceDefinition{})
		if err != nil {
			logf.Log.Info("waiting for the certificates.cert-manager.io CRD", "error", err.Error())
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the certificates.cert-manager.io CRD: %w", err)
	}

	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	}); err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	return mgr.Start(ctx)
}
