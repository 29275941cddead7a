package helm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cos-externalizer/cos-externalizer/test/monitoring"
)

// TestAlertSelector: metrics.alertSelector puts its job and namespace into every alert expression as
// the component config/prometheus/selector does (the first two quoted strings replaced), each
// expression parses with Prometheus's parser and each of its series is selected by them; empty, the
// ServiceMonitor's job and the release's namespace. The schema refuses what PromQL cannot quote.
func TestAlertSelector(t *testing.T) {
	defaults := alertExprs(t, helmTemplate(t, "metrics.serviceMonitor.enabled=true"))
	for name, tc := range map[string]struct {
		set            []string
		job, namespace string
	}{
		"default":           {nil, monitoring.DefaultJob, namespace},
		"job":               {[]string{"metrics.alertSelector.job=kube-system/cos"}, "kube-system/cos", namespace},
		"namespace":         {[]string{"metrics.alertSelector.namespace=platform"}, monitoring.DefaultJob, "platform"},
		"job and namespace": {[]string{"metrics.alertSelector.job=cos", "metrics.alertSelector.namespace=platform"}, "cos", "platform"},
	} {
		t.Run(name, func(t *testing.T) {
			got := alertExprs(t, helmTemplate(t, append(tc.set, "metrics.serviceMonitor.enabled=true")...))
			want := map[string]string{}
			for alert, expr := range defaults {
				w, err := monitoring.WithSelector(expr, tc.job, tc.namespace)
				if err != nil {
					t.Fatal(err)
				}
				want[alert] = w
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("alert expressions (-component's +chart's):\n%s", diff)
			}
			for alert, expr := range got {
				if err := monitoring.RequireMatchers(expr, fmt.Sprintf("job=%q", tc.job), fmt.Sprintf("namespace=%q", tc.namespace)); err != nil {
					t.Errorf("%s: %v", alert, err)
				}
			}
		})
	}
	t.Run("schema", func(t *testing.T) {
		for _, set := range []string{`metrics.alertSelector.job=a"b`, `metrics.alertSelector.namespace=a\\b`, "metrics.alertSelector.cluster=x"} {
			if out, err := helm(t, "template", release, chartDir(t), "-n", namespace, "--set", "metrics.serviceMonitor.enabled=true", "--set", set); err == nil {
				t.Errorf("--set %s: rendered, want refused by the schema", set)
			} else if !strings.Contains(out, "schema") {
				t.Errorf("--set %s: %v, want a schema error:\n%s", set, err, out)
			}
		}
	})
}

// alertExprs are the expressions of the PrometheusRule's alerts by alert name.
func alertExprs(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	rule := find(objs, "PrometheusRule", "cos-externalizer")
	if rule == nil {
		t.Fatal("no PrometheusRule cos-externalizer")
	}
	exprs := map[string]string{}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			if _, err := monitoring.Parse(r["expr"].(string)); err != nil {
				t.Errorf("%s: %v", r["alert"], err)
			}
			exprs[r["alert"].(string)] = r["expr"].(string)
		}
	}
	if len(exprs) == 0 {
		t.Fatal("the PrometheusRule has no alerts")
	}
	return exprs
}
