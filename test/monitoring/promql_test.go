package monitoring

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMetricNames(t *testing.T) {
	tests := map[string]struct {
		expr    string
		want    []string
		wantErr string
	}{
		"selector":        {expr: `up{job="a", namespace=~"b.*"} == 1`, want: []string{"up"}},
		"absent":          {expr: `absent(up{job="x"} == 1)`, want: []string{"up"}},
		"aggregation":     {expr: `sum by (reason) (rate(a_total[15m])) > 0.05`, want: []string{"a_total"}},
		"by after":        {expr: `sum(rate(a_total[5m])) by (le, webhook)`, want: []string{"a_total"}},
		"histogram":       {expr: `histogram_quantile(0.99, sum by (le, webhook) (rate(h_bucket[10m]))) > 5`, want: []string{"h_bucket"}},
		"ratio":           {expr: "sum by (controller) (rate(e_total[5m]))\n/ on (controller) group_left sum by (controller) (rate(r_total[5m]))", want: []string{"e_total", "r_total"}},
		"group_left list": {expr: `a * on (x) group_left (y, z) b`, want: []string{"a", "b"}},
		"time arithmetic": {expr: `(c > 0) - time() < 2 * 86400`, want: []string{"c"}},
		"numbers":         {expr: `x > 1e3 and y < 0x1f or z > .5`, want: []string{"x", "y", "z"}},
		"offset":          {expr: `rate(a[5m] offset 1h) > bool 0`, want: []string{"a"}},
		"subquery":        {expr: `max_over_time(rate(a[5m])[1h:1m])`, want: []string{"a"}},
		"grafana vars":    {expr: `rate(a{job="$job", cluster=~"${cluster}"}[$__rate_interval]) + increase(b[${__range}])`, want: []string{"a", "b"}},
		"recording rule":  {expr: `job:a:rate5m`, want: []string{"job:a:rate5m"}},
		"strings":         {expr: `label_replace(a, "dst", "$1", "src", "(b)")`, want: []string{"a"}},
		"once each":       {expr: `a + a + b`, want: []string{"a", "b"}},
		"braces in label": {expr: `a{l="}"}`, want: []string{"a"}},
		"comment":         {expr: "a # b c\n+ d", want: []string{"a", "d"}},
		"name matcher":    {expr: `{__name__="a", job="x"}`, want: []string{"a"}},
		"labels only":     {expr: `count({job="x"})`},
		"none":            {expr: `vector(1)`},
		"unclosed brace":  {expr: `a{job="x"`, wantErr: "unexpected end of input"},
		"unclosed string": {expr: `a{job="x}`, wantErr: "unterminated quoted string"},
		"stray bracket":   {expr: `a]`, wantErr: "unexpected right bracket"},
		"unclosed by":     {expr: `sum by (le`, wantErr: "unclosed left parenthesis"},
		"unknown func":    {expr: `rat(a[5m])`, wantErr: "unknown function"},
		"wrong type":      {expr: `rate(a)`, wantErr: "expected type range vector"},
		"variable":        {expr: `a * $scale`, wantErr: "unexpected character"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := MetricNames(tc.expr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzMetricNames: any input gives an error or non-empty names, sorted and once each; Parse never
// panics.
func FuzzMetricNames(f *testing.F) {
	for _, s := range []string{`sum by (le) (rate(a_bucket{x="y"}[5m]))`, `absent(up == 1)`, `a{l="}"}`, "$x ${y} `z`", `rate(a[$__rate_interval])`, `{"utf8.name"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := MetricNames(expr)
		if err != nil {
			return
		}
		if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) || slices.Contains(names, "") {
			t.Fatalf("names %q from %q", names, expr)
		}
	})
}
