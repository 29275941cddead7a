package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

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

// TestDashboardPanels: every panel has a title, a unit and queries that name metrics; ids are unique,
// and the JSON is a dashboard with a Prometheus data source variable.
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
			}
		}
	}
	b, err := DashboardJSON(Dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct{ Name, Type, Query string } `json:"list"`
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
	if d.UID == "" || len(d.Templating.List) != 1 || d.Templating.List[0].Type != "datasource" || d.Templating.List[0].Query != "prometheus" {
		t.Errorf("uid %q, templating %+v", d.UID, d.Templating)
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
