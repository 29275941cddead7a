package app

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/callerwatch"
	"github.com/cos-externalizer/cos-externalizer/webhook/server"
)

// webhookServerOptions are the flags of the webhook server's callers and requests: who may call it
// (a client certificate signed by --webhook-client-ca) and how long and large a request may be.
type webhookServerOptions struct {
	clientCA        string
	clientNames     string
	readTimeout     time.Duration
	maxRequestBytes int64
	callersWindow   time.Duration

	// callers watches the API server's calls when they must authenticate (server builds it).
	callers *callerwatch.Watch
}

func (o *webhookServerOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.clientCA, "webhook-client-ca", "", "PEM bundle of the CAs whose client certificates may call the webhook server (the API server's, configured by an AdmissionConfiguration kubeConfigFile): a caller without one fails the TLS handshake, and a kept-alive connection whose certificate the bundle no longer verifies is refused and closed. Re-read when the file changes; a file that cannot be loaded keeps the last good bundle, logged and counted once per version. Empty: any TLS client may call, and the port is a write primitive to whoever reaches it (docs/security.md); the manager warns at start.")
	fs.StringVar(&o.clientNames, "webhook-client-names", "", "Comma-separated common names or DNS names, one of which a client certificate of --webhook-client-ca must carry. Empty: any certificate the CA signed.")
	fs.DurationVar(&o.readTimeout, "webhook-read-timeout", server.DefaultReadTimeout, "Longest time the webhook server spends reading one request, headers and body, from the connection's accept (the TLS handshake included) for its first request and from the first byte of each later one: a client that sends slower is cut off.")
	fs.DurationVar(&o.callersWindow, "webhook-callers-readiness-window", callerwatch.DefaultWindow, "With --webhook-client-ca: the replica's readiness fails (check webhook-callers) when, for this long, callers made TLS handshakes and ClusterObjectSets were created but no call with a verified client certificate arrived, which is a replica refusing the API server's certificate; out of the Service it gets no handshakes, and it is ready again a window later. 0 turns the check off.")
	fs.Int64Var(&o.maxRequestBytes, "webhook-max-request-bytes", server.DefaultMaxRequestBytes, "Largest request body the webhook server reads; a larger one is refused (413).")
}

// names are --webhook-client-names.
func (o *webhookServerOptions) names() []string {
	var names []string
	for _, n := range strings.Split(o.clientNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// validate checks the flags, reading the client CA bundle: an unreadable or empty one is an error at
// start, not a server that refuses every caller.
func (o *webhookServerOptions) validate() error {
	errs := []error{positive("--webhook-read-timeout", o.readTimeout), positive("--webhook-max-request-bytes", o.maxRequestBytes)}
	if o.callersWindow < 0 {
		errs = append(errs, fmt.Errorf("--webhook-callers-readiness-window: must not be negative, got %s", o.callersWindow))
	}
	switch {
	case o.clientCA != "":
		data, err := os.ReadFile(o.clientCA)
		if err == nil {
			_, err = server.ParseClientCABundle(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--webhook-client-ca: %w", err))
		}
	case len(o.names()) > 0:
		errs = append(errs, errors.New("--webhook-client-names: needs --webhook-client-ca"))
	}
	return errors.Join(errs...)
}

// server builds the webhook server; tlsOpts are the webhook's own (never the metrics endpoint's:
// Prometheus authenticates with a token, not a client certificate). The client CA's expiry and
// reload failures go to metrics.
func (o *webhookServerOptions) server(host string, port int, certDir string, tlsOpts []func(*tls.Config), metrics *server.Metrics) (*server.Server, error) {
	so := server.Options{
		Host: host, Port: port, CertDir: certDir, TLSOpts: tlsOpts,
		ReadTimeout: o.readTimeout, MaxRequestBytes: o.maxRequestBytes,
	}
	if o.clientCA != "" {
		if o.callersWindow > 0 {
			o.callers = callerwatch.New(nil, o.callersWindow)
		}
		ca, err := server.NewClientCA(o.clientCA, server.ClientCAOptions{Names: o.names(), Metrics: metrics, Callers: o.callers})
		if err != nil {
			return nil, fmt.Errorf("--webhook-client-ca: %w", err)
		}
		so.ClientCA = ca
	}
	return server.New(so), nil
}

// announce says at start, and in the metric cos_externalizer_webhook_client_authentication_required,
// whether the webhook port authenticates its callers: without --webhook-client-ca it is a warning,
// as the port is then open to anything that reaches it.
func (o *webhookServerOptions) announce(log logr.Logger, serving bool, metrics *server.Metrics) {
	switch {
	case !serving:
		metrics.ClientAuthRequired.Set(1)
	case o.clientCA != "":
		metrics.ClientAuthRequired.Set(1)
		log.Info("the webhook server serves only callers with a client certificate of the client CA", "webhookClientCA", o.clientCA, "webhookClientNames", o.names())
	default:
		metrics.ClientAuthRequired.Set(0)
		warn(log, "the webhook port accepts unauthenticated callers: anything that reaches it can send the webhooks forged admission requests, which the manager acts on (it writes Secrets); set --webhook-client-ca (docs/install.md#authenticating-the-api-servers-calls-to-the-webhooks)",
			"webhookClientCA", "")
	}
}

// watchCallers adds the readiness check webhook-callers (callerwatch), fed the ClusterObjectSets the
// cache sees created after its first list, and reported in metrics and logged when it changes; nothing
// without a client CA or with the check off.
func (o *webhookServerOptions) watchCallers(ctx context.Context, mgr ctrl.Manager, metrics *server.Metrics) error {
	if o.callers == nil {
		return nil
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &olmv1.ClusterObjectSet{})
	if err != nil {
		return fmt.Errorf("watching ClusterObjectSets for the webhook-callers readiness check: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, isInInitialList bool) {
			if !isInInitialList {
				o.callers.Created()
			}
		},
	}); err != nil {
		return fmt.Errorf("watching ClusterObjectSets for the webhook-callers readiness check: %w", err)
	}
	refused := false
	var mu sync.Mutex
	log := ctrl.Log.WithName("webhook-callers")
	return mgr.AddReadyzCheck("webhook-callers", func(*http.Request) error {
		err := o.callers.Check()
		mu.Lock()
		defer mu.Unlock()
		if now := err != nil; now != refused {
			refused = now
			if refused {
				log.Error(err, "this replica reports itself unready")
				metrics.CallersRefused.Set(1)
			} else {
				log.Info("this replica is ready again: the window without authenticated calls is over")
				metrics.CallersRefused.Set(0)
			}
		}
		return err
	})
}
