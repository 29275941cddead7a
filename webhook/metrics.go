package webhook

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cos-externalizer/cos-externalizer/internal/metric"
	"github.com/cos-externalizer/cos-externalizer/webhook/server"
)

// Metrics are the webhook's Prometheus metrics.
type Metrics struct {
	ObjectsExternalized prometheus.Counter
	BytesInline         prometheus.Counter
	BytesStored         prometheus.Counter
	SecretsWritten      prometheus.Counter
	DryRuns             prometheus.Counter
	Refusals            *prometheus.CounterVec
	Latency             *prometheus.HistogramVec
	// WorkRate and WorkBacklog are what bounds the work admitted at once (inflight.Control.Work): the
	// estimated rate on all cores and the work left of the requests in flight, in bytes of charge.
	WorkRate    prometheus.Gauge
	WorkBacklog prometheus.Gauge
	// ExemptionMismatch is 1 when the served secret guard's exemption matchCondition differs from
	// --secret-guard-exempt-users (exemptionCheck).
	ExemptionMismatch prometheus.Gauge
	// UnreferencedSecrets and UnreferencedBytes are what the bound on unreferenced Secrets counts
	// (unreferenced.Bound.Pending).
	UnreferencedSecrets prometheus.Gauge
	UnreferencedBytes   prometheus.Gauge
	// GuardCopies counts the quarantine copies the Secret guard wrote before it admitted a delete.
	GuardCopies prometheus.Counter
	// Server are the webhook server's metrics; its refusals are counted in Refusals.
	Server *server.Metrics
}

// NewMetrics creates the metrics, unregistered (tests use their own); the manager creates its own once
// and registers them (Collectors).
func NewMetrics() *Metrics {
	refusals := metric.CounterVec("cos_externalizer_admission_refusals_total", "Admission requests refused, by reason.", "reason")
	return &Metrics{
		ObjectsExternalized: metric.Counter("cos_externalizer_objects_externalized_total", "Inline objects moved into Secrets by the mutating webhook (dry runs included)."),
		BytesInline:         metric.Counter("cos_externalizer_externalized_inline_bytes_total", "Canonical JSON bytes of the objects externalized."),
		BytesStored:         metric.Counter("cos_externalizer_externalized_stored_bytes_total", "Bytes stored in Secrets for the objects externalized (after compression and deduplication)."),
		SecretsWritten:      metric.Counter("cos_externalizer_secrets_written_total", "object-data Secrets created (a Secret that already held the same content is not counted)."),
		DryRuns:             metric.Counter("cos_externalizer_dry_runs_total", "Dry-run admission requests answered without writing."),
		Refusals:            refusals,
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cos_externalizer_admission_duration_seconds",
			Help:    "Time to answer an admission request, by webhook and operation.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5, 10},
		}, []string{"webhook", "operation"}),
		WorkRate: metric.Gauge("cos_externalizer_admission_work_rate_bytes_per_second",
			"The work the admission webhooks are estimated to do per second on all their cores, in bytes as --max-concurrent-admission-bytes charges them: measured on the requests served, lowered at once by any running past its estimate."),
		WorkBacklog: metric.Gauge("cos_externalizer_admission_work_backlog_bytes",
			"The estimated work left of the admission requests in flight, in bytes as --max-concurrent-admission-bytes charges them."),
		UnreferencedSecrets: metric.Gauge("cos_externalizer_unreferenced_secrets", "object-data Secrets the bound of --max-unreferenced-secrets counts: those of the system namespace that no ClusterObjectSet references or owns, as this replica's cache shows them, and those its webhook writes in flight may create."),
		UnreferencedBytes:   metric.Gauge("cos_externalizer_unreferenced_bytes", "Bytes of data of the object-data Secrets the bound of --max-unreferenced-bytes counts (cos_externalizer_unreferenced_secrets)."),
		ExemptionMismatch:   metric.Gauge("cos_externalizer_secret_guard_exemption_mismatch", "1 when the secret guard's matchCondition not-exempt does not exempt exactly --secret-guard-exempt-users (checked at start)."),
		GuardCopies: metric.Counter("cos_externalizer_secret_guard_copies_total",
			"Quarantine copies of object-data Secrets the Secret guard wrote before it admitted their delete (the garbage collector's, or anyone's not exempt), so that the orphan sweep can restore one a ClusterObjectSet stored meanwhile references."),
		Server: server.NewMetrics(refusals),
	}
}

// Collectors are m's metrics, for the manager to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.ObjectsExternalized, m.BytesInline, m.BytesStored, m.SecretsWritten, m.DryRuns, m.Refusals, m.Latency, m.WorkRate, m.WorkBacklog, m.ExemptionMismatch,
		m.UnreferencedSecrets, m.UnreferencedBytes, m.GuardCopies}, m.Server.Collectors()...)
}
