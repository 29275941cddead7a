package monitoring

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// RuleTests are unit tests of alerting rules in the format of promtool test rules (the alerts'
// rule file is the PrometheusRule under test, so there is no rule_files): input series in the
// expanding notation ("0+1x10", "1x30", "_" for no sample), and the alerts expected to fire at an
// evaluation time. Unlike promtool, exp_annotations lists only the annotations it checks.
type RuleTests struct {
	EvaluationInterval string     `json:"evaluation_interval"`
	Tests              []RuleTest `json:"tests"`
}

// RuleTest is one test: series, and what the alerts do on them.
type RuleTest struct {
	Name        string        `json:"name"`
	Interval    string        `json:"interval"`
	InputSeries []InputSeries `json:"input_series"`
	AlertTests  []AlertTest   `json:"alert_rule_test"`
}

// InputSeries is a series and its values, one every interval from time 0.
type InputSeries struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

// AlertTest lists the alerts of one name that fire at EvalTime; none means it stays quiet.
type AlertTest struct {
	EvalTime  string     `json:"eval_time"`
	Alertname string     `json:"alertname"`
	ExpAlerts []ExpAlert `json:"exp_alerts"`
}

// ExpAlert is an alert expected to fire: all its labels but alertname, and annotations it has.
type ExpAlert struct {
	ExpLabels      map[string]string `json:"exp_labels"`
	ExpAnnotations map[string]string `json:"exp_annotations"`
}

// ReadRuleTests reads rule tests from path, refusing unknown fields.
func ReadRuleTests(path string) (*RuleTests, error) {
	return readStrict[RuleTests](path)
}

// duration parses a Prometheus duration; empty is def.
func duration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := model.ParseDuration(s)
	return time.Duration(d), err
}

// Run runs every test on the alerting rules of r, evaluated as Prometheus does (an alert is pending
// from the first evaluation its expression returns its series, firing once it has been so for its
// for), and returns each difference from what a test expects.
func (rt *RuleTests) Run(r *PrometheusRule) []error {
	every, err := duration(rt.EvaluationInterval, time.Minute)
	if err != nil {
		return []error{fmt.Errorf("evaluation_interval: %w", err)}
	}
	var errs []error
	for i, tc := range rt.Tests {
		for _, err := range tc.run(r.Alerts(), every) {
			errs = append(errs, fmt.Errorf("tests[%d] %q: %w", i, tc.Name, err))
		}
	}
	return errs
}

// firing is an alert as a test sees it: its labels and its expanded annotations.
type firing struct {
	Labels      string
	Annotations map[string]string
}

func (tc RuleTest) run(alerts []Rule, every time.Duration) []error {
	q, err := tc.storage()
	if err != nil {
		return []error{err}
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	byName := map[string]Rule{}
	for _, a := range alerts {
		byName[a.Alert] = a
	}
	var errs []error
	for j, at := range tc.AlertTests {
		errs = append(errs, func() error {
			rule, ok := byName[at.Alertname]
			if !ok {
				return fmt.Errorf("alert_rule_test[%d]: no alert %q", j, at.Alertname)
			}
			evalTime, err := duration(at.EvalTime, 0)
			if err != nil || evalTime%every != 0 {
				return fmt.Errorf("alert_rule_test[%d]: eval_time %q is no multiple of the evaluation interval %v (%v)", j, at.EvalTime, every, err)
			}
			got, err := evaluate(engine, q, rule, evalTime, every)
			if err != nil {
				return fmt.Errorf("alert_rule_test[%d] %s: %w", j, at.Alertname, err)
			}
			var want []firing
			for _, e := range at.ExpAlerts {
				l := labels.NewBuilder(labels.FromMap(e.ExpLabels)).Set(model.AlertNameLabel, at.Alertname).Labels()
				want = append(want, firing{Labels: l.String(), Annotations: e.ExpAnnotations})
			}
			slices.SortFunc(want, func(a, b firing) int { return strings.Compare(a.Labels, b.Labels) })
			if !slices.EqualFunc(want, got, func(w, g firing) bool { return w.Labels == g.Labels }) {
				return fmt.Errorf("alert_rule_test[%d] %s at %s: firing %v, want %v", j, at.Alertname, at.EvalTime, labelsOf(got), labelsOf(want))
			}
			for i, w := range want {
				for k, v := range w.Annotations {
					if g := got[i].Annotations[k]; g != v {
						return fmt.Errorf("alert_rule_test[%d] %s at %s: %s annotation %s is %q, want %q", j, at.Alertname, at.EvalTime, w.Labels, k, g, v)
					}
				}
			}
			return nil
		}())
	}
	return slices.DeleteFunc(errs, func(e error) bool { return e == nil })
}

func labelsOf(fs []firing) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Labels)
	}
	return out
}

// evaluate evaluates rule every interval from time 0 to until and returns the alerts firing then,
// sorted by labels.
func evaluate(engine *promql.Engine, q storage.Queryable, rule Rule, until, every time.Duration) ([]firing, error) {
	hold, err := duration(rule.For, 0)
	if err != nil {
		return nil, fmt.Errorf("for: %w", err)
	}
	ctx := context.Background()
	query := func(ctx context.Context, expr string, ts time.Time) (promql.Vector, error) {
		qry, err := engine.NewInstantQuery(ctx, q, nil, expr, ts)
		if err != nil {
			return nil, err
		}
		defer qry.Close()
		res := qry.Exec(ctx)
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Vector()
	}
	type active struct {
		at     time.Duration
		sample promql.Sample
	}
	pending := map[string]*active{}
	var out []firing
	for ts := time.Duration(0); ts <= until; ts += every {
		at := time.Unix(0, 0).UTC().Add(ts)
		vec, err := query(ctx, rule.Expr, at)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, s := range vec {
			key := withoutName(s.Metric).String()
			seen[key] = true
			if a, ok := pending[key]; ok {
				a.sample = s
				continue
			}
			pending[key] = &active{at: ts, sample: s}
		}
		for key := range pending {
			if !seen[key] {
				delete(pending, key)
			}
		}
		if ts != until {
			continue
		}
		for _, a := range pending {
			if ts-a.at < hold {
				continue
			}
			metric := withoutName(a.sample.Metric)
			b := labels.NewBuilder(metric)
			for k, v := range rule.Labels {
				b.Set(k, v)
			}
			b.Set(model.AlertNameLabel, rule.Alert)
			f := firing{Labels: b.Labels().String(), Annotations: map[string]string{}}
			for k, text := range rule.Annotations {
				defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
				data := template.AlertTemplateData(metric.Map(), nil, "", a.sample)
				expanded, err := template.NewTemplateExpander(ctx, defs+text, "__alert_"+rule.Alert, data,
					model.TimeFromUnixNano(at.UnixNano()), query, nil, nil).Expand()
				if err != nil {
					return nil, fmt.Errorf("annotation %s: %w", k, err)
				}
				f.Annotations[k] = expanded
			}
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b firing) int { return strings.Compare(a.Labels, b.Labels) })
	return out, nil
}

// withoutName is l without its metric name, as an alert's labels are.
func withoutName(l labels.Labels) labels.Labels {
	return l.DropReserved(func(name string) bool { return name == model.MetricNameLabel })
}

// storage holds the test's input series in memory.
func (tc RuleTest) storage() (storage.Queryable, error) {
	every, err := duration(tc.Interval, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("interval: %w", err)
	}
	var series []storage.Series
	for i, in := range tc.InputSeries {
		lset, values, err := promQL.ParseSeriesDesc(in.Series + " " + in.Values)
		if err != nil {
			return nil, fmt.Errorf("input_series[%d]: %w", i, err)
		}
		var samples []chunks.Sample
		for n, v := range values {
			if v.Omitted {
				continue
			}
			if v.Histogram != nil {
				return nil, fmt.Errorf("input_series[%d]: native histograms are not supported", i)
			}
			samples = append(samples, floatSample{t: (time.Duration(n) * every).Milliseconds(), f: v.Value})
		}
		series = append(series, storage.NewListSeries(lset, samples))
	}
	slices.SortFunc(series, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
			set := &seriesSet{i: -1}
			for _, s := range series {
				if matchAll(matchers, s.Labels()) {
					set.series = append(set.series, s)
				}
			}
			return set
		},
	}}, nil
}

func matchAll(matchers []*labels.Matcher, l labels.Labels) bool {
	for _, m := range matchers {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

// seriesSet iterates series in label order.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// floatSample is a float sample of an input series.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }
