package webhook_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// BenchmarkAdmission creates ClusterObjectSets of three sizes through the real API server and
// reports the mutating webhook's latency as the API server measured it: per request, the change of
// apiserver_admission_webhook_admission_duration_seconds_sum for our webhook. Run with
// -benchtime=Nx (make bench uses 30x).
func BenchmarkAdmission(b *testing.B) {
	sizes := []struct {
		name string
		make func(name string) (*olmv1.ClusterObjectSet, error)
	}{
		{"20KB", func(name string) (*olmv1.ClusterObjectSet, error) {
			return builders.COS(name, builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
				builders.WithPhase("configuration", configMapsOfSize("default", 20<<10, 10)...)), nil
		}},
		{"650KB-argocd", func(name string) (*olmv1.ClusterObjectSet, error) {
			return builders.Bundle(name, "argocd-install", "argocd")
		}},
		{"2.8MB-prometheus-operator", func(name string) (*olmv1.ClusterObjectSet, error) {
			return builders.Bundle(name, "prometheus-operator-crds", "monitoring")
		}},
	}
	ctx := context.Background()
	c := testenv.Env.Client
	for _, size := range sizes {
		b.Run(size.name, func(b *testing.B) {
			var durations []float64
			handlerBefore := handlerSeconds(b)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				obj, err := size.make(fmt.Sprintf("bench-%s-%d-%d", strings.ToLower(strings.ReplaceAll(size.name, ".", "")), time.Now().UnixNano()%1e6, i))
				if err != nil {
					b.Fatal(err)
				}
				before := webhookDurationSum(b)
				b.StartTimer()
				if err := c.Create(ctx, obj); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				durations = append(durations, webhookDurationSum(b)-before)
				_ = c.Delete(ctx, obj)
				b.StartTimer()
			}
			b.ReportMetric((handlerSeconds(b)-handlerBefore)*1000/float64(len(durations)), "mean-handler-ms")
			sort.Float64s(durations)
			b.ReportMetric(quantile(durations, 0.50)*1000, "p50-webhook-ms")
			b.ReportMetric(quantile(durations, 0.99)*1000, "p99-webhook-ms")
		})
	}
}

// configMapsOfSize returns n inline ConfigMaps of about total bytes together.
func configMapsOfSize(namespace string, total, n int) []olmv1.ClusterObjectSetObject {
	out := make([]olmv1.ClusterObjectSetObject, n)
	for i := range n {
		cm := builders.ConfigMap(namespace, fmt.Sprintf("cm-%d", i), map[string]string{"blob": strings.Repeat(strconv.Itoa(i%10), total/n-120)})
		out[i] = builders.Inline(cm)
	}
	return out
}

// webhookDurationSum reads the API server's total time spent in our mutating webhook.
func webhookDurationSum(b *testing.B) float64 {
	b.Helper()
	text, err := testenv.Env.APIServerMetrics(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	sum, err := testenv.SumMetric(strings.NewReader(text), "apiserver_admission_webhook_admission_duration_seconds_sum{",
		`name="externalize.cos-externalizer.io"`)
	if err != nil {
		b.Fatal(err)
	}
	return sum
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// handlerSeconds reads the manager's own total time in the mutating webhook's handler (CREATE).
func handlerSeconds(b *testing.B) float64 {
	b.Helper()
	text, err := testenv.ScrapeMetrics(context.Background(), manager.MetricsURL)
	if err != nil {
		b.Fatal(err)
	}
	sum, err := testenv.SumMetric(strings.NewReader(text), "cos_externalizer_admission_duration_seconds_sum{", `webhook="externalize"`, `operation="CREATE"`)
	if err != nil {
		b.Fatal(err)
	}
	return sum
}
