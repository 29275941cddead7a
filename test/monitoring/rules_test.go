package monitoring

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRules: config/prometheus/rules.yaml parses as a PrometheusRule with only known fields; every
// alert has a severity, a summary, a description, a valid for and a runbook_url whose anchor is a
// section of docs/runbook.md; every section is an alert's; every expression names a metric.
func TestRules(t *testing.T) {
	rules, err := ReadRules("../../config/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := Anchors(string(runbook))
	var alerts, sections []string
	for _, r := range rules.Alerts() {
		alerts = append(alerts, r.Alert)
		if r.Alert == "" {
			t.Errorf("a rule without an alert name: %q", r.Expr)
			continue
		}
		if names, err := MetricNames(r.Expr); err != nil || len(names) == 0 {
			t.Errorf("%s: expression %q names %v (%v)", r.Alert, r.Expr, names, err)
		}
		if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
			t.Errorf("%s: for %q (%v)", r.Alert, r.For, err)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s", r.Alert, a)
			}
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, RunbookURL+"#")
		if !ok || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q is no section of docs/runbook.md", r.Alert, url)
		}
		sections = append(sections, anchor)
	}
	for a := range anchors {
		if a != "runbook" && !slices.Contains(sections, a) {
			t.Errorf("docs/runbook.md section #%s is no alert's", a)
		}
	}
	if n := len(slices.Compact(slices.Sorted(slices.Values(alerts)))); n != len(alerts) {
		t.Errorf("alert names repeat: %q", alerts)
	}
}

func TestAnchors(t *testing.T) {
	md := "# Runbook\n\n## CosExternalizerDown\ntext\n## A `code` heading, with: punctuation!\n```sh\n# not a heading\n```\n## Twice\n## Twice\n### under_score-dash ##\n"
	got := Anchors(md)
	want := map[string]bool{"runbook": true, "cosexternalizerdown": true, "a-code-heading-with-punctuation": true,
		"twice": true, "twice-1": true, "under_score-dash": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("anchors (-want +got):\n%s", diff)
	}
}

func TestReadRulesRefusesUnknownFields(t *testing.T) {
	path := t.TempDir() + "/r.yaml"
	if err := os.WriteFile(path, []byte("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nspec:\n  groups:\n  - name: g\n    rules:\n    - alert: A\n      expr: up\n      labels: {}\n      anotations: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRules(path); err == nil || !strings.Contains(err.Error(), "anotations") {
		t.Errorf("error %v, want the unknown field named", err)
	}
}
