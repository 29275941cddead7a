package controllers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/secretuse"
)

// Progressing reasons always exported, as 0 when no ClusterObjectSet has them, so that alerts on
// them have a series to watch.
var alertingReasons = []string{olmv1.ReasonBlocked, olmv1.ReasonRetrying, olmv1.ReasonProgressDeadlineExceeded}

// StatusCollector exports, at scrape time, gauges read from the manager's cache: ClusterObjectSets
// by Progressing reason, and object-data Secrets waiting for the orphan sweep. It serves every
// replica, leader or not, and whoever writes the status (this reconciler or OLM's).
type StatusCollector struct {
	reader          client.Reader
	systemNamespace string
	byReason        *prometheus.Desc
	orphaned        *prometheus.Desc
}

// NewStatusCollector returns a collector over reader (the manager's cache).
func NewStatusCollector(reader client.Reader, systemNamespace string) *StatusCollector {
	return &StatusCollector{
		reader:          reader,
		systemNamespace: systemNamespace,
		byReason: prometheus.NewDesc("cos_externalizer_clusterobjectsets",
			"ClusterObjectSets by the reason of their Progressing condition (\"None\" before any status); Blocked, Retrying and ProgressDeadlineExceeded are always exported.",
			[]string{"reason"}, nil),
		orphaned: prometheus.NewDesc("cos_externalizer_orphaned_secrets",
			"object-data Secrets of the system namespace that no ClusterObjectSet references or owns: the orphan sweep deletes them once their grace period has passed.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StatusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byReason
	ch <- c.orphaned
}

// Collect implements prometheus.Collector. A cache that cannot answer within a second (not synced
// yet) yields no samples, rather than a wrong zero. It reads the cache's own objects, without copying
// them (it changes none): a scrape then costs a pass over the objects, not a copy of every one.
func (c *StatusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	sets := &olmv1.ClusterObjectSetList{}
	if err := c.reader.List(ctx, sets, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	counts := map[string]int{}
	for _, r := range alertingReasons {
		counts[r] = 0
	}
	for i := range sets.Items {
		cos := &sets.Items[i]
		reason := "None"
		if cond := apimeta.FindStatusCondition(cos.Status.Conditions, olmv1.ConditionProgressing); cond != nil {
			reason = cond.Reason
		}
		counts[reason]++
	}
	for reason, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.byReason, prometheus.GaugeValue, float64(n), reason)
	}
	secrets := &corev1.SecretList{}
	if err := c.reader.List(ctx, secrets, client.InNamespace(c.systemNamespace), client.HasLabels{olmv1.LabelRevisionName}, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	// Grace ignored: every Secret the sweep deletes now or once its grace has passed.
	pending := secretuse.UnusedSecrets(secrets.Items, sets.Items, c.systemNamespace)
	ch <- prometheus.MustNewConstMetric(c.orphaned, prometheus.GaugeValue, float64(len(pending)))
}
