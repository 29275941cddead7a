package webhook_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/monitoring"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// TestMonitoringReadsExportedMetrics: every metric that an alert of config/prometheus or a panel of
// the Grafana dashboard reads is one the manager exports (up is Prometheus's own). The vectors that
// appear with their first sample get one first: an admitted and a refused dry run; controller-runtime's
// appear once the controllers have started, which the test waits for.
func TestMonitoringReadsExportedMetrics(t *testing.T) {
	ctx := context.Background()
	always := builders.WithAnnotations(map[string]string{admission.Annotation: "always"})
	admitted := builders.COS("monitoring-admitted", always, builders.WithPhase("configuration", builders.InlineConfigMaps("default", "monitoring", 2)...))
	if err := testenv.Env.Client.Create(ctx, admitted, client.DryRunAll); err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	refused := builders.COS("", always, builders.WithPhase("configuration", builders.InlineConfigMaps("default", "monitoring", 2)...))
	refused.GenerateName = "monitoring-"
	if err := testenv.Env.Client.Create(ctx, refused, client.DryRunAll); err == nil {
		t.Fatal("a generateName create with inline objects to externalize was admitted")
	}

	rules, err := monitoring.ReadRules(testenv.RepoPath(t, "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	panels, err := monitoring.DashboardQueries(testenv.RepoPath(t, "config", "grafana", "cos-externalizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string][]string{"the dashboard": panels}
	for _, r := range rules.Alerts() {
		queries["alert "+r.Alert] = []string{r.Expr}
	}
	readers := map[string][]string{} // metric name: who reads it
	for where, exprs := range queries {
		for _, expr := range exprs {
			names, err := monitoring.MetricNames(expr)
			if err != nil {
				t.Errorf("%s: %v", where, err)
			}
			for _, n := range names {
				readers[n] = append(readers[n], where)
			}
		}
	}
	// controller-runtime's vectors appear once the controllers have started.
	var text string
	framework.Eventually(ctx, t, "the manager to export every metric the alerts and the dashboard read", func(ctx context.Context) (bool, string) {
		if text, err = testenv.ScrapeMetrics(ctx, manager.MetricsURL); err != nil {
			return false, err.Error()
		}
		exported := map[string]bool{"up": true}
		for _, line := range strings.Split(text, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				exported[line[:strings.IndexAny(line, "{ ")]] = true
			}
		}
		var missing []string
		for n, where := range readers {
			if !exported[n] {
				missing = append(missing, fmt.Sprintf("%s (read by %s)", n, strings.Join(where, ", ")))
			}
		}
		slices.Sort(missing)
		return len(missing) == 0, "not exported: " + strings.Join(missing, "; ")
	})
	if !slices.ContainsFunc(strings.Split(text, "\n"), func(l string) bool { return strings.HasPrefix(l, "cos_externalizer_admission_refusals_total{") }) {
		t.Error("the refusal was not counted")
	}
}
