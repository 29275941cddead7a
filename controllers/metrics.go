package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	secretsSwept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cos_externalizer_secrets_swept_total",
		Help: "Orphaned object-data Secrets deleted by the sweep.",
	})
	ownerRefsPatched = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cos_externalizer_secret_owner_references_patched_total",
		Help: "ownerReferences to their ClusterObjectSet added to object-data Secrets.",
	})
)

func init() { ctrlmetrics.Registry.MustRegister(secretsSwept, ownerRefsPatched) }
