package app

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// webhookServerOptions are the flags of the webhook server's callers and requests: who may call it
// (a client certificate signed by --webhook-client-ca) and how long and large a request may be.
type webhookServerOptions struct {
	clientCA        string
	clientNames     string
	readTimeout     time.Duration
	maxRequestBytes int64
}

func (o *webhookServerOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.clientCA, "webhook-client-ca", "", "PEM bundle of the CAs whose client certificates may call the webhook server (the API server's, configured by an AdmissionConfiguration kubeConfigFile): a caller without one fails the TLS handshake, and a kept-alive connection whose certificate the bundle no longer verifies is refused and closed. Re-read when the file changes; a file that cannot be loaded keeps the last good bundle, logged and counted once per version. Empty: any TLS client may call, and the port is a write primitive to whoever reaches it (docs/security.md); the manager warns at start.")
	fs.StringVar(&o.clientNames, "webhook-client-names", "", "Comma-separated common names or DNS names, one of which a client certificate of --webhook-client-ca must carry. Empty: any certificate the CA signed.")
	fs.DurationVar(&o.readTimeout, "webhook-read-timeout", webhook.DefaultReadTimeout, "Longest time the webhook server spends reading one request, headers and body, from the connection's accept (the TLS handshake included) for its first request and from the first byte of each later one: a client that sends slower is cut off.")
	fs.Int64Var(&o.maxRequestBytes, "webhook-max-request-bytes", webhook.DefaultMaxRequestBytes, "Largest request body the webhook server reads; a larger one is refused (413).")
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
	switch {
	case o.clientCA != "":
		data, err := os.ReadFile(o.clientCA)
		if err == nil {
			_, err = webhook.ParseClientCABundle(data)
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
func (o *webhookServerOptions) server(host string, port int, certDir string, tlsOpts []func(*tls.Config), metrics *webhook.Metrics) (*webhook.Server, error) {
	so := webhook.ServerOptions{
		Host: host, Port: port, CertDir: certDir, TLSOpts: tlsOpts,
		ReadTimeout: o.readTimeout, MaxRequestBytes: o.maxRequestBytes,
	}
	if o.clientCA != "" {
		ca, err := webhook.NewClientCA(o.clientCA, webhook.ClientCAOptions{Names: o.names(), Metrics: metrics})
		if err != nil {
			return nil, fmt.Errorf("--webhook-client-ca: %w", err)
		}
		so.ClientCA = ca
	}
	return webhook.NewServer(so), nil
}

// announce says at start, and in the metric cos_externalizer_webhook_client_authentication_required,
// whether the webhook port authenticates its callers: without --webhook-client-ca it is a warning,
// as the port is then open to anything that reaches it.
func (o *webhookServerOptions) announce(log logr.Logger, serving bool, metrics *webhook.Metrics) {
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
