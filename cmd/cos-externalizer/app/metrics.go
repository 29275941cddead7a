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

// metrics are the process's metrics of the webhooks, the controllers and the serving certificate,
// injected into each: created and registered with controller-runtime's registry (served on the
// manager's metrics endpoint) once per process, whether or not the webhooks or rollout are enabled
// (tests run the manager more than once).
type metrics struct {
	webhook     *webhook.Metrics
	controllers *controllers.Metrics
	servingCert *servingcert.Metrics

	// status is the collector of the manager that runs last (statusCollector).
	mu     sync.Mutex
	status prometheus.Collector
}

// processMetrics returns the process's metrics, registered.
var processMetrics = sync.OnceValues(func() (*metrics, error) {
	m := &metrics{webhook: webhook.NewMetrics(), controllers: controllers.NewMetrics(), servingCert: servingcert.NewMetrics()}
	for _, c := range slices.Concat(m.webhook.Collectors(), m.controllers.Collectors(), m.servingCert.Collectors()) {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	return m, nil
})

// statusCollector registers c, which reads a manager's cache, in place of the collector of an
// earlier manager of this process.
func (m *metrics) statusCollector(c prometheus.Collector) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.status != nil {
		ctrlmetrics.Registry.Unregister(m.status)
	}
	if err := ctrlmetrics.Registry.Register(c); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	m.status = c
	return nil
}
