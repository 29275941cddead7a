package monitoring

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

const rulesPath = "../../config/prometheus/rules.yaml"

func readRules(t *testing.T) *PrometheusRule {
	t.Helper()
	rules, err := ReadRules(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// selectorMatchers are the matchers every series of an alert is selected by.
func selectorMatchers(job, namespace string) []string {
	return []string{fmt.Sprintf("job=%q", job), fmt.Sprintf("namespace=%q", namespace)}
}

// TestRules: config/prometheus/rules.yaml parses as a PrometheusRule with only known fields and
// passes Prometheus's own checks of a rule file (promtool check rules); every alert has a severity,
// a summary, a description, a valid for and a runbook_url whose anchor is a section of
// docs/runbook.md; every section is an alert's; every series is selected by the default job and
// namespace, which the selector component's replacements replace.
func TestRules(t *testing.T) {
	rules := readRules(t)
	if err := rules.Check(); err != nil {
		t.Errorf("promtool check rules: %v", err)
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
		if err := RequireMatchers(r.Expr, selectorMatchers(DefaultJob, DefaultNamespace)...); err != nil {
			t.Errorf("%s: %v", r.Alert, err)
		}
		other, err := WithSelector(r.Expr, "j", "n")
		if err == nil {
			err = RequireMatchers(other, selectorMatchers("j", "n")...)
		}
		if err != nil {
			t.Errorf("%s: with another selector: %v", r.Alert, err)
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

// TestRuleCheckRefuses: Check refuses what promtool check rules refuses.
func TestRuleCheckRefuses(t *testing.T) {
	tests := map[string]struct {
		rule    Rule
		wantErr string
	}{
		"bad PromQL":    {rule: Rule{Alert: "A", Expr: "rate(up)"}, wantErr: "expected type range vector"},
		"bad template":  {rule: Rule{Alert: "A", Expr: "up", Annotations: map[string]string{"summary": "{{ $value | nosuch }}"}}, wantErr: "nosuch"},
		"bad for":       {rule: Rule{Alert: "A", Expr: "up", For: "soon"}, wantErr: "soon"},
		"no expression": {rule: Rule{Alert: "A"}, wantErr: "field 'expr' must be set"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &PrometheusRule{}
			r.Spec.Groups = []RuleGroup{{Name: "g", Rules: []Rule{tc.rule}}}
			if err := r.Check(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestAlerts runs the unit tests of testdata/alerts.yaml (promtool test rules) on the alerts, and
// checks that each alert has a test where it fires and one where it stays quiet.
func TestAlerts(t *testing.T) {
	rules := readRules(t)
	tests, err := ReadRuleTests("testdata/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range tests.Run(rules) {
		t.Error(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertTests {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, r := range rules.Alerts() {
		if !fires[r.Alert] || !quiet[r.Alert] {
			t.Errorf("%s: a test where it fires: %v, one where it stays quiet: %v", r.Alert, fires[r.Alert], quiet[r.Alert])
		}
	}
}

// TestRuleTestsFail: the runner reports an alert that fires when a test wants it quiet, one that
// does not fire or fires with other labels or annotations, and a bad test.
func TestRuleTestsFail(t *testing.T) {
	rules := &PrometheusRule{}
	rules.Spec.Groups = []RuleGroup{{Name: "g", Rules: []Rule{{Alert: "High", Expr: `x > 1`, For: "5m",
		Labels: map[string]string{"severity": "warning"}, Annotations: map[string]string{"summary": "{{ $labels.pod }} at {{ $value }}"}}}}}
	series := []InputSeries{{Series: `x{pod="a"}`, Values: "2x20"}}
	fire := ExpAlert{ExpLabels: map[string]string{"severity": "warning", "pod": "a"}, ExpAnnotations: map[string]string{"summary": "a at 2"}}
	tests := map[string]struct {
		test    AlertTest
		wantErr string
	}{
		"fires":                {test: AlertTest{EvalTime: "5m", Alertname: "High", ExpAlerts: []ExpAlert{fire}}},
		"pending is quiet":     {test: AlertTest{EvalTime: "4m", Alertname: "High"}},
		"fires, quiet wanted":  {test: AlertTest{EvalTime: "5m", Alertname: "High"}, wantErr: `firing [{alertname="High", pod="a", severity="warning"}], want []`},
		"quiet, firing wanted": {test: AlertTest{EvalTime: "4m", Alertname: "High", ExpAlerts: []ExpAlert{fire}}, wantErr: "firing [], want"},
		"other labels":         {test: AlertTest{EvalTime: "5m", Alertname: "High", ExpAlerts: []ExpAlert{{ExpLabels: map[string]string{"severity": "critical", "pod": "a"}}}}, wantErr: `want [{alertname="High", pod="a", severity="critical"}]`},
		"other annotation":     {test: AlertTest{EvalTime: "5m", Alertname: "High", ExpAlerts: []ExpAlert{{ExpLabels: fire.ExpLabels, ExpAnnotations: map[string]string{"summary": "a at 3"}}}}, wantErr: `annotation summary is "a at 2", want "a at 3"`},
		"unknown alert":        {test: AlertTest{EvalTime: "5m", Alertname: "Low"}, wantErr: `no alert "Low"`},
		"between evaluations":  {test: AlertTest{EvalTime: "90s", Alertname: "High"}, wantErr: "no multiple of the evaluation interval"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rt := &RuleTests{Tests: []RuleTest{{Name: name, InputSeries: series, AlertTests: []AlertTest{tc.test}}}}
			errs := rt.Run(rules)
			if tc.wantErr == "" {
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr) {
				t.Errorf("errors %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}

// TestSelectorOverlay: kustomize builds the overlay docs/install.md shows (testdata/selector-overlay:
// config/prometheus, a ConfigMap with another job and namespace, and the component
// config/prometheus/selector) into alerts that select that job and namespace, and leaves the
// ConfigMap out.
func TestSelectorOverlay(t *testing.T) {
	kubectl, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", "testdata/selector-overlay").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	var cm struct {
		Data struct{ Job, Namespace string }
	}
	b, err := os.ReadFile("testdata/selector-overlay/alert-selector.yaml")
	if err == nil {
		err = yaml.Unmarshal(b, &cm)
	}
	if err != nil || cm.Data.Job == DefaultJob || cm.Data.Namespace == DefaultNamespace {
		t.Fatalf("the overlay's ConfigMap: %+v (%v)", cm, err)
	}
	var kinds []string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, obj.Kind)
		if obj.Kind != "PrometheusRule" {
			continue
		}
		path := t.TempDir() + "/rules.yaml"
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		rules, err := ReadRules(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules.Alerts() {
			if err := RequireMatchers(r.Expr, selectorMatchers(cm.Data.Job, cm.Data.Namespace)...); err != nil {
				t.Errorf("%s: %v", r.Alert, err)
			}
		}
	}
	slices.Sort(kinds)
	if want := []string{"ClusterRoleBinding", "PrometheusRule", "Secret", "ServiceAccount", "ServiceMonitor"}; !cmp.Equal(want, kinds) {
		t.Errorf("kinds %q, want %q", kinds, want)
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
