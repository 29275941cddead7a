// Command cert-manager-controller is a build recipe, not project code: cert-manager's controller at the
// version pinned in ../go.mod, cut down to what tests on the local control plane need. cert-manager's
// own cmd/controller module is not served by the Go module proxy, so this main wires the library the
// way that command does (cmd/controller/app.Run): every controller registers a constructor in the
// init() of its package (imported below), the constructors share one controller.ContextFactory, and
// the shared informer factories start once all of them are built.
//
// What differs from the real command, on purpose:
//   - only the controllers that issue and renew certificates from SelfSigned and CA Issuers and
//     ClusterIssuers run (no ACME, Vault, Venafi, ingress or Gateway shims, no metrics controller);
//   - no leader election, and no metrics, healthz or profiling server: nothing listens on a port, so
//     several local control planes can run side by side on one machine;
//   - SIGTERM or SIGINT stops every control loop and the command exits 0 (a second signal kills it).
//
// Flags: --kubeconfig (registered by controller-runtime on the global FlagSet; empty means KUBECONFIG,
// in-cluster or ~/.kube/config), --cluster-resource-namespace, --concurrent-workers and klog's flags
// (-v etc.).
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

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"
	_ "sigs.k8s.io/controller-runtime/pkg/client/config" // registers --kubeconfig on flag.CommandLine

	"github.com/cert-manager/cert-manager/pkg/controller"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"         // the CA issuer type, for the (cluster)issuers controllers
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned" // the SelfSigned issuer type
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// controllers run, by their registered names. A Certificate is issued by the chain trigger (sets
// Issuing) -> key-manager (next private key) -> request-manager (a CertificateRequest) -> approver
// (approves it: nothing else does without cert-manager's webhook/approver policy) -> issuer-ca or
// issuer-selfsigned (signs it) -> issuing (writes the Secret, clears Issuing); readiness sets Ready and
// revision-manager prunes old CertificateRequests. Renewal (`cmctl renew` sets Issuing on the status)
// re-enters that chain at key-manager.
var controllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
	crapprover.ControllerName,
	crca.CRControllerName,
	crselfsigned.CRControllerName,
}

func main() {
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "kube-system",
		"Namespace of the Secrets that ClusterIssuers read (e.g. a CA ClusterIssuer's key pair).")
	workers := flag.Int("concurrent-workers", 5, "Workers per controller.")
	klog.InitFlags(nil)
	flag.Parse()

	logf.InitLogs()
	defer logf.FlushLogs()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	go func() { <-ctx.Done(); stop() }() // a second signal terminates at once
	ctx = logf.NewContext(ctx, logf.Log, "controller")

	err := run(ctx, flag.Lookup("kubeconfig").Value.String(), *clusterResourceNamespace, *workers)
	if err != nil && !errors.Is(err, context.Canceled) {
		logf.Log.Error(err, "cert-manager controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
	logf.Log.Info("control loops exited")
}

func run(ctx context.Context, kubeconfig, clusterResourceNamespace string, workers int) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig: kubeconfig,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: clusterResourceNamespace,
		},
		// Upstream's defaults (cmd/controller's configuration defaults).
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	// The base context holds the shared informer factories every controller registered its informers on.
	base, err := factory.Build()
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	for _, name := range controllers {
		constructor, ok := controller.Known()[name]
		if !ok {
			return fmt.Errorf("controller %q is not registered (missing import?)", name)
		}
		c, err := constructor(factory)
		if err != nil {
			return fmt.Errorf("building controller %s: %w", name, err)
		}
		g.Go(func() error { return c.Run(workers, ctx) })
	}
	logf.Log.Info("starting controllers", "controllers", controllers, "clusterResourceNamespace", clusterResourceNamespace)

	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}
