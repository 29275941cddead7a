package controllers

import "github.com/prometheus/client_golang/prometheus"

// The controllers' counters; the manager registers them (Collectors). The gauges read from the cache
// at scrape time are the StatusCollector's.
var (
	secretsSwept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cos_externalizer_secrets_swept_total",
		Help: "Orphaned object-data Secrets deleted by the sweep.",
	})
	orphansWaiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cos_externalizer_orphan_secrets_waiting",
		Help: "Object-data Secrets the sweep (on the leader) has seen unused and waits to delete until they have stayed so, unchanged, for the grace period.",
	})
	ownerRefsPatched = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cos_externalizer_secret_owner_references_patched_total",
		Help: "ownerReferences to their ClusterObjectSet added to object-data Secrets.",
	})
	crdCleanupRetriggers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cos_externalizer_crd_cleanup_retriggers_total",
		Help: "Deleted CustomResourceDefinitions whose stalled cleanup by the API server the teardown re-triggered.",
	})
)

// Collectors are the controllers' counters, for the manager to register.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{secretsSwept, orphansWaiting, ownerRefsPatched, crdCleanupRetriggers, appliesPerformed, appliesSkipped}
}
