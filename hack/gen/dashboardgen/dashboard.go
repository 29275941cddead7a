package main

import (
	"bytes"
	"encoding/json"
)

// Job is the scrape job of the manager's metrics (the metrics Service's name, as the ServiceMonitor
// names it): controller-runtime's, the process's and the Go runtime's metrics carry the same names
// in every operator.
const Job = `job="cos-externalizer-metrics"`

// Selector selects the series of every query: the job, and the dashboard's cluster and namespace
// variables (a Prometheus without a cluster label matches the variable's All, .*).
const Selector = Job + `, cluster=~"$cluster", namespace="$namespace"`

// Variables are the dashboard's template variables after its data source: the cluster (the values of
// the label cluster of the manager's up series; All when there is none) and the namespace of the
// install in that cluster.
var Variables = []Variable{
	{Name: "cluster", Label: "Cluster", Query: `label_values(up{` + Job + `}, cluster)`, IncludeAll: true},
	{Name: "namespace", Label: "Namespace", Query: `label_values(up{` + Job + `, cluster=~"$cluster"}, namespace)`},
}

// Variable is a query variable: its values are what Query, a Grafana label_values(), returns.
type Variable struct {
	Name, Label, Query string
	IncludeAll         bool
}

// Query is one PromQL query of a panel and its legend.
type Query struct {
	Expr, Legend string
}

// Panel is a time series panel: what it shows, in which unit.
type Panel struct {
	Title, Description, Unit string
	Queries                  []Query
}

// Row is a titled row of panels, two to a line.
type Row struct {
	Title  string
	Panels []Panel
}

// Dashboard is the Grafana dashboard of config/grafana, which dashboardgen writes.
var Dashboard = []Row{
	{Title: "Admission", Panels: []Panel{
		{Title: "Admission requests", Unit: "reqps", Description: "Requests the webhooks answer, by webhook and operation, summed over the replicas.",
			Queries: []Query{{`sum by (webhook, operation) (rate(cos_externalizer_admission_duration_seconds_count{` + Selector + `}[$__rate_interval]))`, "{{webhook}} {{operation}}"}}},
		{Title: "Admission latency", Unit: "s", Description: "p50 and p99 of the time to answer, by webhook. The API server refuses a request after the webhook's timeout (5 to 15 s), and the webhooks fail closed.",
			Queries: []Query{
				{`histogram_quantile(0.5, sum by (le, webhook) (rate(cos_externalizer_admission_duration_seconds_bucket{` + Selector + `}[$__rate_interval])))`, "p50 {{webhook}}"},
				{`histogram_quantile(0.99, sum by (le, webhook) (rate(cos_externalizer_admission_duration_seconds_bucket{` + Selector + `}[$__rate_interval])))`, "p99 {{webhook}}"},
			}},
		{Title: "Refusals", Unit: "reqps", Description: "Refused admission requests by reason: bad_request, invalid, too_large and name_required are the submitter's; internal_error, write_failed and secret_conflict are not (docs/runbook.md#cosexternalizeradmissionrefusals).",
			Queries: []Query{{`sum by (reason) (rate(cos_externalizer_admission_refusals_total{` + Selector + `}[$__rate_interval]))`, "{{reason}}"}}},
		{Title: "Admission work in flight", Unit: "s", Description: "The estimated time the admission requests in flight need to finish, on the busiest replica: a request that, with this work ahead, could not finish before the API server's deadline for its call is refused with 429 (reason deadline; docs/webhook.md#concurrent-admissions).",
			Queries: []Query{{`max(cos_externalizer_admission_work_backlog_bytes{` + Selector + `} / cos_externalizer_admission_work_rate_bytes_per_second{` + Selector + `})`, "seconds of work"}}},
		{Title: "Externalized", Unit: "ops", Description: "Inline objects moved into Secrets, Secrets created (content already stored is not written again), dry runs.",
			Queries: []Query{
				{`sum(rate(cos_externalizer_objects_externalized_total{` + Selector + `}[$__rate_interval]))`, "objects"},
				{`sum(rate(cos_externalizer_secrets_written_total{` + Selector + `}[$__rate_interval]))`, "Secrets written"},
				{`sum(rate(cos_externalizer_dry_runs_total{` + Selector + `}[$__rate_interval]))`, "dry runs"},
			}},
		{Title: "Externalized bytes", Unit: "Bps", Description: "Canonical JSON of the objects externalized, and what their Secrets store after compression and deduplication.",
			Queries: []Query{
				{`sum(rate(cos_externalizer_externalized_inline_bytes_total{` + Selector + `}[$__rate_interval]))`, "inline"},
				{`sum(rate(cos_externalizer_externalized_stored_bytes_total{` + Selector + `}[$__rate_interval]))`, "stored"},
			}},
	}},
	{Title: "ClusterObjectSets", Panels: []Panel{
		{Title: "ClusterObjectSets by Progressing reason", Unit: "short", Description: "Read from the manager's cache at scrape time; Blocked needs a person (docs/runbook.md#cosexternalizerblocked).",
			Queries: []Query{{`max by (reason) (cos_externalizer_clusterobjectsets{` + Selector + `})`, "{{reason}}"}}},
		{Title: "Object-data Secrets", Unit: "short", Description: "Secrets no ClusterObjectSet references or owns (the sweep deletes them after their grace period), and Secrets swept per hour.",
			Queries: []Query{
				{`max(cos_externalizer_orphaned_secrets{` + Selector + `})`, "orphaned"},
				{`sum(increase(cos_externalizer_secrets_swept_total{` + Selector + `}[1h]))`, "swept per hour"},
			}},
		{Title: "Applies", Unit: "ops", Description: "Server-side applies of managed objects by why, and applies skipped because the live object is unchanged.",
			Queries: []Query{
				{`sum by (reason) (rate(cos_externalizer_applies_total{` + Selector + `}[$__rate_interval]))`, "{{reason}}"},
				{`sum(rate(cos_externalizer_applies_skipped_total{` + Selector + `}[$__rate_interval]))`, "skipped"},
			}},
		{Title: "Reconciles", Unit: "ops", Description: "Reconciles and failed reconciles by controller (docs/runbook.md#cosexternalizerreconcileerrors).",
			Queries: []Query{
				{`sum by (controller) (rate(controller_runtime_reconcile_total{` + Selector + `}[$__rate_interval]))`, "{{controller}}"},
				{`sum by (controller) (rate(controller_runtime_reconcile_errors_total{` + Selector + `}[$__rate_interval]))`, "{{controller}} errors"},
			}},
		{Title: "Queue wait", Unit: "s", Description: "p99 of the time an object waits in each controller's queue before it is reconciled.",
			Queries: []Query{{`histogram_quantile(0.99, sum by (le, name) (rate(workqueue_queue_duration_seconds_bucket{` + Selector + `}[$__rate_interval])))`, "{{name}}"}}},
	}},
	{Title: "Replicas", Panels: []Panel{
		{Title: "Webhook certificate expires in", Unit: "s", Description: "Time left on the certificate each replica serves (docs/runbook.md#cosexternalizercertificateexpiring).",
			Queries: []Query{{`(cos_externalizer_webhook_certificate_expiry_timestamp_seconds{` + Selector + `} > 0) - time()`, "{{pod}}"}}},
		{Title: "Webhook callers authenticated", Unit: "short", Description: "1 where a replica serves only callers with a client certificate of --webhook-client-ca, 0 where its webhook port accepts anyone (docs/runbook.md#cosexternalizerwebhookunauthenticated); 1 while a replica cannot load its client CA file (docs/runbook.md#cosexternalizerwebhookclientcareloadfailing).",
			Queries: []Query{
				{`cos_externalizer_webhook_client_authentication_required{` + Selector + `}`, "required {{pod}}"},
				{`cos_externalizer_webhook_client_ca_reload_failing{` + Selector + `}`, "reload failing {{pod}}"},
			}},
		{Title: "Webhook client CA expires in", Unit: "s", Description: "Time left on the earliest-expiring CA of the --webhook-client-ca bundle each replica uses (docs/runbook.md#cosexternalizerwebhookclientcaexpiring).",
			Queries: []Query{{`(cos_externalizer_webhook_client_ca_expiry_timestamp_seconds{` + Selector + `} > 0) - time()`, "{{pod}}"}}},
		{Title: "Up", Unit: "short", Description: "Replicas Prometheus scrapes successfully.",
			Queries: []Query{{`sum(up{` + Selector + `})`, "up"}}},
		{Title: "Memory", Unit: "bytes", Description: "Resident memory and the Go heap of each replica, against the runtime's soft limit (--memory-limit-ratio of the container's limit).",
			Queries: []Query{
				{`process_resident_memory_bytes{` + Selector + `}`, "RSS {{pod}}"},
				{`go_memstats_heap_inuse_bytes{` + Selector + `}`, "heap {{pod}}"},
				{`go_gc_gomemlimit_bytes{` + Selector + `}`, "limit {{pod}}"},
			}},
		{Title: "CPU", Unit: "short", Description: "CPU seconds a second of each replica (no CPU limit: throttling would stall admission).",
			Queries: []Query{{`rate(process_cpu_seconds_total{` + Selector + `}[$__rate_interval])`, "{{pod}}"}}},
	}},
}

// DashboardJSON renders d as Grafana's dashboard JSON model (schema 39, Grafana 10 and later), with a
// data source variable so that it imports into any Grafana with a Prometheus data source.
func DashboardJSON(d []Row) ([]byte, error) {
	type obj = map[string]any
	ds := obj{"type": "prometheus", "uid": "${datasource}"}
	var panels []any
	id, y := 1, 0
	for _, r := range d {
		panels = append(panels, obj{"id": id, "type": "row", "title": r.Title, "collapsed": false, "panels": []any{},
			"gridPos": obj{"h": 1, "w": 24, "x": 0, "y": y}})
		id, y = id+1, y+1
		for i, p := range r.Panels {
			var targets []any
			for j, q := range p.Queries {
				targets = append(targets, obj{"datasource": ds, "expr": q.Expr, "legendFormat": q.Legend, "refId": string(rune('A' + j))})
			}
			panels = append(panels, obj{
				"id": id, "type": "timeseries", "title": p.Title, "description": p.Description, "datasource": ds,
				"gridPos":     obj{"h": 8, "w": 12, "x": 12 * (i % 2), "y": y + 8*(i/2)},
				"fieldConfig": obj{"defaults": obj{"unit": p.Unit}, "overrides": []any{}},
				"options":     obj{"legend": obj{"displayMode": "list", "placement": "bottom", "showLegend": true}, "tooltip": obj{"mode": "multi", "sort": "desc"}},
				"targets":     targets,
			})
			id++
		}
		y += 8 * ((len(r.Panels) + 1) / 2)
	}
	variables := []any{obj{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "hide": 0, "current": obj{}}}
	for _, v := range Variables {
		variable := obj{"name": v.Name, "label": v.Label, "type": "query", "datasource": ds, "hide": 0, "current": obj{},
			"query": obj{"query": v.Query, "refId": "PrometheusVariableQueryEditor-VariableQuery"}, "definition": v.Query,
			"refresh": 2, "sort": 1, "includeAll": v.IncludeAll, "multi": false}
		if v.IncludeAll {
			variable["allValue"] = ".*"
		}
		variables = append(variables, variable)
	}
	dashboard := obj{
		"uid": "cos-externalizer", "title": "cos-externalizer", "description": "The ClusterObjectSet externalizer: admission, rollout and replicas (generated by hack/gen/dashboardgen).",
		"tags": []string{"cos-externalizer", "olm"}, "editable": true, "graphTooltip": 1, "schemaVersion": 39, "version": 1,
		"time": obj{"from": "now-6h", "to": "now"}, "refresh": "1m", "timezone": "",
		"templating":  obj{"list": variables},
		"annotations": obj{"list": []any{}},
		"panels":      panels,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(dashboard); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
