package local

import (
	"context"
	"testing"
	"time"

	"github.com/cos-externalizer/cos-externalizer/test/e2e"
)

// BenchmarkAdmissionReplicas measures admission latency through the Balancer under 10 concurrent
// clients (server-side dry runs of an externalized ClusterObjectSet), with two replicas and then with
// one of them stopped; each iteration is 500 requests per configuration.
func BenchmarkAdmissionReplicas(b *testing.B) {
	ctx := context.Background()
	cluster.SetLogf(b.Logf)
	var two, one []e2e.Result
	for b.Loop() {
		if err := cluster.Deploy(ctx, e2e.ModeCertManager, 2); err != nil {
			b.Fatal(err)
		}
		e2e.EnsureNamespace(b, cluster.Config(), "e2e-load")
		two = append(two, e2e.MeasureAdmission(b, cluster, 500))
		if err := cluster.Stop(ctx, 1); err != nil {
			b.Fatal(err)
		}
		one = append(one, e2e.MeasureAdmission(b, cluster, 500))
	}
	p := func(rs []e2e.Result, f func(e2e.Result) time.Duration) float64 {
		var sum time.Duration
		for _, r := range rs {
			sum += f(r)
		}
		return float64(sum.Microseconds()) / 1000 / float64(len(rs))
	}
	p50 := func(r e2e.Result) time.Duration { return r.P50 }
	p99 := func(r e2e.Result) time.Duration { return r.P99 }
	b.ReportMetric(p(two, p50), "p50-ms/2-replicas")
	b.ReportMetric(p(two, p99), "p99-ms/2-replicas")
	b.ReportMetric(p(one, p50), "p50-ms/1-replica")
	b.ReportMetric(p(one, p99), "p99-ms/1-replica")
	b.ReportMetric(p(one, p99)/p(two, p99), "p99-ratio-1:2")
}

// BenchmarkRenewalToServed measures the time from triggering a renewal of the cert-manager
// Certificate until every replica serves the new certificate (cert-manager's issuance included).
func BenchmarkRenewalToServed(b *testing.B) {
	ctx := context.Background()
	cluster.SetLogf(b.Logf)
	if err := cluster.Deploy(ctx, e2e.ModeCertManager, 2); err != nil {
		b.Fatal(err)
	}
	var issued, served time.Duration
	for b.Loop() {
		i, s := e2e.RenewAndWait(b, cluster)
		issued += i
		served += s
	}
	b.ReportMetric(float64(issued.Milliseconds())/float64(b.N), "ms-to-issued")
	b.ReportMetric(float64(served.Milliseconds())/float64(b.N), "ms-to-served")
	b.ReportMetric(float64((served-issued).Milliseconds())/float64(b.N), "ms-issued-to-served")
}
