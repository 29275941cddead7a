package app

import (
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cos-externalizer/cos-externalizer/certs/servingcert"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// registerMetrics registers the metrics of the webhooks, the controllers and the serving certificate
// with controller-runtime's registry, served on the manager's metrics endpoint: once per process,
// whether or not the webhooks or rollout are enabled (tests run the manager more than once).
var registerMetrics = sync.OnceValue(func() error {
	for _, c := range slices.Concat(webhook.Collectors(), controllers.Collectors(), servingcert.Collectors()) {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	return nil
})

var (
	statusCollectorMu sync.Mutex
	statusCollector   prometheus.Collector
)

// registerStatusCollector registers c with controller-runtime's registry in place of the collector
// of an earlier manager of this process (tests run the manager more than once).
func registerStatusCollector(c prometheus.Collector) {
	statusCollectorMu.Lock()
	defer statusCollectorMu.Unlock()
	if statusCollector != nil {
		ctrlmetrics.Registry.Unregister(statusCollector)
	}
	ctrlmetrics.Registry.MustRegister(c)
	statusCollector = c
}
