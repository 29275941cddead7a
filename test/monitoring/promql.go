// Package monitoring reads what config/prometheus and config/grafana hold, with Prometheus's own
// PromQL parser and engine: the metric names and selectors of their expressions, the alerting rules
// (checked as promtool check rules does, and unit-tested on series as promtool test rules does), the
// runbook sections the alerts link to, and the queries of the Grafana dashboard (generated from its
// spec by hack/gen/dashboardgen).
package monitoring

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// promQL is Prometheus's PromQL parser, with the options a Prometheus server has by default.
var promQL = parser.NewParser(parser.Options{})

// grafanaIntervals are Grafana's interval variables, which stand where PromQL wants a duration.
var grafanaIntervals = regexp.MustCompile(`\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}`)

// Parse parses a PromQL expression. Grafana's interval variables ($__rate_interval, $__interval,
// $__range) read as 5m; any other Grafana variable may appear only inside strings (a label
// matcher's value such as "$namespace"), where PromQL takes it as it is.
func Parse(expr string) (parser.Expr, error) {
	e, err := promQL.ParseExpr(grafanaIntervals.ReplaceAllString(expr, "5m"))
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	return e, nil
}

// Selectors returns the vector selectors of expr (the series it reads), in the order they appear.
func Selectors(expr string) ([]*parser.VectorSelector, error) {
	e, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out, nil
}

// MetricNames returns the metric names expr reads, sorted and once each: the name of every vector
// selector that has one, as a name or as __name__="..." (a selector by other labels, or by a regular
// expression on the name, names none).
func MetricNames(expr string) ([]string, error) {
	selectors, err := Selectors(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, vs := range selectors {
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				names = append(names, m.Value)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// RequireMatchers returns an error naming every vector selector of expr that lacks one of the
// matchers want, each written as PromQL writes it (`job="x"`, `cluster=~"$cluster"`).
func RequireMatchers(expr string, want ...string) error {
	selectors, err := Selectors(expr)
	if err != nil {
		return err
	}
	var errs []error
	for _, vs := range selectors {
		have := map[string]bool{}
		for _, m := range vs.LabelMatchers {
			have[m.String()] = true
		}
		for _, w := range want {
			if !have[w] {
				errs = append(errs, fmt.Errorf("%s: no %s", vs, w))
			}
		}
	}
	return errors.Join(errs...)
}
