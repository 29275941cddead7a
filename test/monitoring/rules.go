package monitoring

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"sigs.k8s.io/yaml"
)

// RunbookURL is where the alerts' runbook_url annotations point: docs/runbook.md on the default
// branch, one section per alert.
const RunbookURL = "https://github.com/cos-externalizer/cos-externalizer/blob/main/docs/runbook.md"

// The job and namespace that select the manager's series in the alerts of config/prometheus; the
// component config/prometheus/selector replaces them.
const (
	DefaultJob       = "cos-externalizer-metrics"
	DefaultNamespace = "olmv1-system"
)

// WithSelector returns expr selecting job and namespace in place of the first two quoted strings,
// as the replacements of config/prometheus/selector do (the expression split at double quotes, its
// second and fourth parts replaced).
func WithSelector(expr, job, namespace string) (string, error) {
	parts := strings.Split(expr, `"`)
	if len(parts) < 5 {
		return "", fmt.Errorf("%q has fewer than two quoted strings", expr)
	}
	parts[1], parts[3] = job, namespace
	return strings.Join(parts, `"`), nil
}

// PrometheusRule is the part of prometheus-operator's PrometheusRule that config/prometheus uses;
// ReadRules refuses any other field.
type PrometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []RuleGroup `json:"groups"`
	} `json:"spec"`
}

// RuleGroup is a group of rules.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is an alerting rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ReadRules reads a PrometheusRule from path, refusing unknown fields.
func ReadRules(path string) (*PrometheusRule, error) {
	r, err := readStrict[PrometheusRule](path)
	if err != nil {
		return nil, err
	}
	if r.Kind != "PrometheusRule" || r.APIVersion != "monitoring.coreos.com/v1" {
		return nil, fmt.Errorf("%s: %s %s is no monitoring.coreos.com/v1 PrometheusRule", path, r.APIVersion, r.Kind)
	}
	return r, nil
}

// RuleFile is the rule file Prometheus reads for r: its groups.
func (r *PrometheusRule) RuleFile() ([]byte, error) {
	return yaml.Marshal(map[string]any{"groups": r.Spec.Groups})
}

// Check checks r as promtool check rules checks a rule file: Prometheus's rule file parser,
// refusing unknown fields, then its validation of every group and rule (names, durations, labels,
// annotation templates, the PromQL of every expression).
func (r *PrometheusRule) Check() error {
	b, err := r.RuleFile()
	if err != nil {
		return err
	}
	_, errs := rulefmt.Parse(b, false, model.UTF8Validation, promQL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return errors.Join(errs...)
}

// readStrict reads a T from the YAML file at path, refusing unknown fields.
func readStrict[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := yaml.UnmarshalStrict(b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// Alerts are the alerting rules of every group.
func (r *PrometheusRule) Alerts() []Rule {
	var out []Rule
	for _, g := range r.Spec.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

var heading = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$`)

// Anchors are the anchors GitHub gives the headings of Markdown text: lower case, spaces as hyphens,
// punctuation other than hyphens and underscores dropped, a repeated one suffixed -1, -2, ...
// Headings inside fenced code blocks do not count.
func Anchors(markdown string) map[string]bool {
	var text strings.Builder
	fenced := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			text.WriteString(line + "\n")
		}
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(text.String(), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}
