package monitoring

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// RunbookURL is where the alerts' runbook_url annotations point: docs/runbook.md on the default
// branch, one section per alert.
const RunbookURL = "https://github.com/cos-externalizer/cos-externalizer/blob/main/docs/runbook.md"

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
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// ReadRules reads a PrometheusRule from path, refusing unknown fields.
func ReadRules(path string) (*PrometheusRule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &PrometheusRule{}
	if err := yaml.UnmarshalStrict(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Kind != "PrometheusRule" || r.APIVersion != "monitoring.coreos.com/v1" {
		return nil, fmt.Errorf("%s: %s %s is no monitoring.coreos.com/v1 PrometheusRule", path, r.APIVersion, r.Kind)
	}
	return r, nil
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
