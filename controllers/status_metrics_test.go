package controllers

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
)

// TestStatusCollectorComputesOnChange: once watching, a scrape reuses the gauges until an event of a
// ClusterObjectSet or a Secret says the cache changed; without watching, every scrape computes.
func TestStatusCollectorComputesOnChange(t *testing.T) {
	ctx := context.Background()
	cos := func(name string) *olmv1.ClusterObjectSet {
		return &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	reader := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cos("a")).Build()
	informers := &informertest.FakeInformers{Scheme: scheme.New()}
	watched := NewStatusCollector(reader, "olmv1-system")
	if err := watched.Watch(ctx, informers); err != nil {
		t.Fatal(err)
	}
	unwatched := NewStatusCollector(reader, "olmv1-system")
	// The ClusterObjectSets without a status ("None").
	sets := func(c *StatusCollector) float64 {
		t.Helper()
		ch := make(chan prometheus.Metric, 16)
		c.Collect(ch)
		close(ch)
		for m := range ch {
			var out dto.Metric
			if err := m.Write(&out); err != nil {
				t.Fatal(err)
			}
			for _, l := range out.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == "None" {
					return out.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	if got := sets(watched); got != 1 {
		t.Fatalf("%v ClusterObjectSets, want 1", got)
	}
	if err := reader.Create(ctx, cos("b")); err != nil {
		t.Fatal(err)
	}
	if got := sets(watched); got != 1 {
		t.Errorf("no event yet: %v ClusterObjectSets, want the 1 computed before", got)
	}
	if got := sets(unwatched); got != 2 {
		t.Errorf("not watching: %v ClusterObjectSets, want 2", got)
	}
	inf, err := informers.FakeInformerFor(ctx, &olmv1.ClusterObjectSet{})
	if err != nil {
		t.Fatal(err)
	}
	inf.Add(cos("b"))
	if got := sets(watched); got != 2 {
		t.Errorf("after the event: %v ClusterObjectSets, want 2", got)
	}
}
