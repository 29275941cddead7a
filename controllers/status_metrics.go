package controllers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
)

// Progressing reasons always exported, as 0 when no ClusterObjectSet has them, so that alerts on
// them have a series to watch.
var alertingReasons = []string{olmv1.ReasonBlocked, olmv1.ReasonRetrying, olmv1.ReasonProgressDeadlineExceeded}

// StatusCollector exports, at scrape time, gauges read from the manager's cache: ClusterObjectSets
// by Progressing reason, and object-data Secrets waiting for the orphan sweep. It serves every
// replica, leader or not, and whoever writes the status (this reconciler or OLM's). Once it follows
// the cache's events (Watch), a scrape computes the gauges again only when a ClusterObjectSet or a
// Secret changed since the last one: a pass over every object costs a large cluster milliseconds a
// scrape.
type StatusCollector struct {
	reader          client.Reader
	systemNamespace string
	byReason        *prometheus.Desc
	orphaned        *prometheus.Desc

	// changes counts the cache's events (Watch); watching says whether it is counted at all.
	changes  atomic.Uint64
	watching atomic.Bool
	// mu guards the samples last computed, when changes was seen.
	mu   sync.Mutex
	seen uint64
	last []prometheus.Metric
}

// Watch makes the collector follow the ClusterObjectSet and Secret informers of informers (the
// manager's cache, before it starts), so that scrapes between two changes reuse the gauges.
func (c *StatusCollector) Watch(ctx context.Context, informers cache.Informers) error {
	changed := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.changes.Add(1) },
		UpdateFunc: func(_, _ any) { c.changes.Add(1) },
		DeleteFunc: func(any) { c.changes.Add(1) },
	}
	for _, obj := range []client.Object{&olmv1.ClusterObjectSet{}, &corev1.Secret{}} {
		inf, err := informers.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T for the status metrics: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(changed); err != nil {
			return err
		}
	}
	c.watching.Store(true)
	return nil
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
	// Read before the cache is: a change during the computation is computed again next time.
	n := c.changes.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watching.Load() && c.last != nil && c.seen == n {
		for _, m := range c.last {
			ch <- m
		}
		return
	}
	samples := c.compute()
	if samples == nil {
		return
	}
	c.last, c.seen = samples, n
	for _, m := range samples {
		ch <- m
	}
}

// compute reads the gauges from the cache; nil when the cache cannot answer.
func (c *StatusCollector) compute() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	sets := &olmv1.ClusterObjectSetList{}
	if err := c.reader.List(ctx, sets, client.UnsafeDisableDeepCopy); err != nil {
		return nil
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
	var out []prometheus.Metric
	for reason, n := range counts {
		out = append(out, prometheus.MustNewConstMetric(c.byReason, prometheus.GaugeValue, float64(n), reason))
	}
	secrets := &corev1.SecretList{}
	if err := c.reader.List(ctx, secrets, client.InNamespace(c.systemNamespace), client.HasLabels{olmv1.LabelRevisionName}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	// Grace ignored: every Secret the sweep deletes now or once its grace has passed.
	pending := secretuse.UnusedSecrets(secrets.Items, sets.Items, c.systemNamespace)
	return append(out, prometheus.MustNewConstMetric(c.orphaned, prometheus.GaugeValue, float64(len(pending))))
}
