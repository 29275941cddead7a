package controllers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cos-externalizer/cos-externalizer/internal/reconciler/drift"
)

// Metrics are the controllers' counters and gauges; the manager creates them once and registers them
// (Collectors). The gauges read from the cache at scrape time are the StatusCollector's.
type Metrics struct {
	SecretsSwept         prometheus.Counter
	OrphansWaiting       prometheus.Gauge
	OwnerRefsPatched     prometheus.Counter
	CRDCleanupRetriggers prometheus.Counter
	// AppliesPerformed counts server-side applies by why the object was applied (unchanged).
	AppliesPerformed *prometheus.CounterVec
	AppliesSkipped   prometheus.Counter
}

// NewMetrics creates the metrics, unregistered (tests use their own).
func NewMetrics() *Metrics {
	return &Metrics{
		SecretsSwept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cos_externalizer_secrets_swept_total",
			Help: "Orphaned object-data Secrets deleted by the sweep.",
		}),
		OrphansWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cos_externalizer_orphan_secrets_waiting",
			Help: "Object-data Secrets the sweep (on the leader) has seen unused and waits to delete until they have stayed so, unchanged, for the grace period.",
		}),
		OwnerRefsPatched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cos_externalizer_secret_owner_references_patched_total",
			Help: "ownerReferences to their ClusterObjectSet added to object-data Secrets.",
		}),
		CRDCleanupRetriggers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cos_externalizer_crd_cleanup_retriggers_total",
			Help: "Deleted CustomResourceDefinitions whose stalled cleanup by the API server the teardown re-triggered.",
		}),
		AppliesPerformed: exportedAtZero(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cos_externalizer_applies_total",
			Help: "Server-side applies of managed objects, by why the object was applied: absent (it did not exist), digest (the desired object changed, or the object does not carry its digest), managed-fields (no managedFields entry of ours) or field (another manager changed or removed a field of ours).",
		}, []string{"reason"}), reasonAbsent, drift.ReasonDigest, drift.ReasonManagedFields, drift.ReasonField),
		AppliesSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cos_externalizer_applies_skipped_total",
			Help: "Server-side applies of managed objects skipped because the live object holds what would be applied.",
		}),
	}
}

// Collectors are m's metrics, for the manager to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.SecretsSwept, m.OrphansWaiting, m.OwnerRefsPatched, m.CRDCleanupRetriggers, m.AppliesPerformed, m.AppliesSkipped}
}

// exportedAtZero creates v's series of every label value, so each is exported from the start, at 0.
func exportedAtZero(v *prometheus.CounterVec, values ...string) *prometheus.CounterVec {
	for _, value := range values {
		v.WithLabelValues(value)
	}
	return v
}
