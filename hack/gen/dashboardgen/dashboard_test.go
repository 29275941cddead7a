package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cos-externalizer/cos-externalizer/test/monitoring"
)

// TestDashboardGenerated: config/grafana holds what dashboardgen writes (make dashboard).
func TestDashboardGenerated(t *testing.T) {
	want, err := DashboardJSON(Dashboard)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../config/grafana/cos-externalizer.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("config/grafana/cos-externalizer.json is out of date: run make dashboard")
	}
}

// labelValues is a Grafana label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+), (\w+)\)$`)

// TestDashboardPanels lints the dashboard: every panel has a title, a unit, a description and queries
// with a legend; every query parses with Prometheus's PromQL parser, names metrics, and selects each
// series by the job and the cluster and namespace variables; every variable's selector parses; ids are
// unique; the JSON is a dashboard with a Prometheus data source variable, then cluster, then
// namespace. That the metrics are ones the manager exports is checked against a running manager
// (test/integration/webhook).
func TestDashboardPanels(t *testing.T) {
	for _, r := range Dashboard {
		for _, p := range r.Panels {
			if p.Title == "" || p.Unit == "" || p.Description == "" || len(p.Queries) == 0 {
				t.Errorf("panel %+v: want a title, a unit, a description and queries", p)
			}
			for _, q := range p.Queries {
				if names, err := monitoring.MetricNames(q.Expr); err != nil || len(names) == 0 || q.Legend == "" {
					t.Errorf("panel %q: query %q names %v (%v), legend %q", p.Title, q.Expr, names, err, q.Legend)
				}
				if err := monitoring.RequireMatchers(q.Expr, Job, `cluster=~"$cluster"`, `namespace="$namespace"`); err != nil {
					t.Errorf("panel %q: %v", p.Title, err)
				}
			}
		}
	}
	for _, v := range Variables {
		m := labelValues.FindStringSubmatch(v.Query)
		if m == nil {
			t.Errorf("variable %s: query %q is no label_values(selector, label)", v.Name, v.Query)
			continue
		}
		if err := monitoring.RequireMatchers(m[1], Job); err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
		}
	}
	b, err := DashboardJSON(Dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Datasource *struct{ Type, UID string }
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	want := []struct{ Name, Type string }{{"datasource", "datasource"}, {"cluster", "query"}, {"namespace", "query"}}
	if diff := cmp.Diff(want, d.Templating.List); d.UID == "" || diff != "" {
		t.Errorf("uid %q, variables (-want +got):\n%s", d.UID, diff)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && (p.Datasource == nil || p.Datasource.UID != "${datasource}") {
			t.Errorf("panel %d: data source %+v", p.ID, p.Datasource)
		}
	}
}
