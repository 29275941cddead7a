// Package metric declares the Prometheus metrics of the components (webhook, controllers,
// certs/servingcert) in one line each: a name and its help text, unregistered.
package metric

import "github.com/prometheus/client_golang/prometheus"

// Counter is a counter of the given name and help text.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// Gauge is a gauge of the given name and help text.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// CounterVec is a counter of the given name and help text with one series per value of the labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}
