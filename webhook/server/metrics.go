package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cos-externalizer/cos-externalizer/internal/metric"
)

// Metrics are the webhook server's metrics: who may call it, its client CA bundle, and the requests
// it refused for their caller's certificate.
type Metrics struct {
	// ClientAuthRequired is 1 when the webhook server serves only callers with a client certificate
	// of --webhook-client-ca (or serves no webhooks), 0 when it serves any caller.
	ClientAuthRequired prometheus.Gauge
	// ClientCAReloadFailures counts the versions of the --webhook-client-ca file that could not be
	// loaded; ClientCAReloadFailing is 1 while the file cannot be (the last good bundle is in use);
	// ClientCAExpiry is the earliest expiry of the bundle's certificates (ClientCA).
	ClientCAReloadFailures prometheus.Counter
	ClientCAReloadFailing  prometheus.Gauge
	ClientCAExpiry         prometheus.Gauge
	// CallersRefused is 1 while the readiness check webhook-callers fails: callers made handshakes and
	// ClusterObjectSets were created for a window, but no call with a verified certificate arrived.
	CallersRefused prometheus.Gauge
	// Refusals is the webhooks' refusal metric, by reason (admission.Reason), which its owner
	// registers: the server counts the requests it refuses for their kept-alive connection's client
	// certificate (ClientCA.Reverify) as admission.ReasonClientCertificate.
	Refusals *prometheus.CounterVec
}

// NewMetrics creates the metrics, unregistered, counting refusals in refusals.
func NewMetrics(refusals *prometheus.CounterVec) *Metrics {
	return &Metrics{
		ClientAuthRequired: metric.Gauge("cos_externalizer_webhook_client_authentication_required",
			"1 when the webhook server serves only callers with a client certificate of --webhook-client-ca (or serves no webhooks); 0 when any client that reaches its port may call the webhooks."),
		ClientCAReloadFailures: metric.Counter("cos_externalizer_webhook_client_ca_reload_failures_total",
			"Versions of the --webhook-client-ca file (missing, unreadable, empty or not PEM) that could not be loaded; the last good bundle stays in use."),
		ClientCAReloadFailing: metric.Gauge("cos_externalizer_webhook_client_ca_reload_failing",
			"1 while the --webhook-client-ca file cannot be loaded (the last good bundle is in use, and a restart would fail)."),
		ClientCAExpiry: metric.Gauge("cos_externalizer_webhook_client_ca_expiry_timestamp_seconds",
			"Earliest expiry (Unix time) of the certificates of the --webhook-client-ca bundle in use; 0 without one."),
		CallersRefused: metric.Gauge("cos_externalizer_webhook_callers_refused",
			"1 while this replica is unready because, for --webhook-callers-readiness-window, callers made TLS handshakes and ClusterObjectSets were created but no call with a verified client certificate arrived (it most likely refuses the API server's certificate)."),
		Refusals: refusals,
	}
}

// Collectors are m's own metrics, for the manager to register (not Refusals: its owner registers it).
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ClientAuthRequired, m.ClientCAReloadFailures, m.ClientCAReloadFailing, m.ClientCAExpiry, m.CallersRefused}
}
