package controllers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/drift"
	"github.com/cos-externalizer/cos-externalizer/internal/metric"
)

// Metrics are the controllers' counters and gauges; the manager creates them once and registers them
// (Collectors). The gauges read from the cache at scrape time are the StatusCollector's.
type Metrics struct {
	SecretsSwept         prometheus.Counter
	OrphansWaiting       prometheus.Gauge
	SecretsRestored      prometheus.Counter
	QuarantineCopies     prometheus.Gauge
	RestoreFailures      prometheus.Counter
	OwnerRefsPatched     prometheus.Counter
	CRDCleanupRetriggers prometheus.Counter
	// AppliesPerformed counts server-side applies by why the object was applied (unchanged).
	AppliesPerformed *prometheus.CounterVec
	AppliesSkipped   prometheus.Counter
}

// NewMetrics creates the metrics, unregistered (tests use their own).
func NewMetrics() *Metrics {
	return &Metrics{
		SecretsSwept:         metric.Counter("cos_externalizer_secrets_swept_total", "Orphaned object-data Secrets deleted by the sweep."),
		OrphansWaiting:       metric.Gauge("cos_externalizer_orphan_secrets_waiting", "Object-data Secrets the sweep (on the leader) has seen unused and waits to delete until they have been seen so for the grace period."),
		SecretsRestored:      metric.Counter("cos_externalizer_secrets_restored_total", "Object-data Secrets the sweep deleted and created again from their quarantine copy because a ClusterObjectSet admitted meanwhile references them."),
		QuarantineCopies:     metric.Gauge("cos_externalizer_quarantine_copies", "Quarantine copies of swept object-data Secrets the sweep (on the leader) keeps until no admitted create can still reference them."),
		RestoreFailures:      metric.Counter("cos_externalizer_secret_restore_failures_total", "Swept object-data Secrets a live ClusterObjectSet references that the sweep could not create again from their quarantine copy (a copy changed or unreadable)."),
		OwnerRefsPatched:     metric.Counter("cos_externalizer_secret_owner_references_patched_total", "ownerReferences to their ClusterObjectSet added to object-data Secrets."),
		CRDCleanupRetriggers: metric.Counter("cos_externalizer_crd_cleanup_retriggers_total", "Deleted CustomResourceDefinitions whose stalled cleanup by the API server the teardown re-triggered."),
		AppliesPerformed:     exportedAtZero(metric.CounterVec("cos_externalizer_applies_total", "Server-side applies of managed objects, by why the object was applied: absent (it did not exist), digest (the desired object changed, or the object does not carry its digest), managed-fields (no managedFields entry of ours) or field (another manager changed or removed a field of ours).", "reason"), reasonAbsent, drift.ReasonDigest, drift.ReasonManagedFields, drift.ReasonField),
		AppliesSkipped:       metric.Counter("cos_externalizer_applies_skipped_total", "Server-side applies of managed objects skipped because the live object holds what would be applied."),
	}
}

// Collectors are m's metrics, for the manager to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.SecretsSwept, m.OrphansWaiting, m.SecretsRestored, m.QuarantineCopies, m.RestoreFailures, m.OwnerRefsPatched, m.CRDCleanupRetriggers, m.AppliesPerformed, m.AppliesSkipped}
}

// exportedAtZero creates v's series of every label value, so each is exported from the start, at 0.
func exportedAtZero(v *prometheus.CounterVec, values ...string) *prometheus.CounterVec {
	for _, value := range values {
		v.WithLabelValues(value)
	}
	return v
}
