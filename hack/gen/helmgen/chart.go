package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Mode is a value of the chart's mode and the overlay of config/ it reproduces.
type Mode struct{ Name, Overlay string }

// Modes, the first one the default. config/production is not a mode: it is config/default with
// three replicas (--set replicas=3).
var Modes = []Mode{{"cert-manager", "default"}, {"self-signed", "self-signed"}, {"webhook-only", "webhook-only"}}

// MonitoringOverlay is the optional overlay that metrics.serviceMonitor.enabled adds; a mode whose
// overlay has a folder of its own in it (config/prometheus/self-signed) gets that one.
const MonitoringOverlay = "prometheus"

// SystemNamespace is the overlays' namespace, which the chart replaces with the release's.
const SystemNamespace = "olmv1-system"

// Known names and paths the values land on.
const (
	managerContainer  = "manager"
	metricsPortName   = "metrics"
	metricsBindFlag   = "--metrics-bind-address="
	metricsSecureFlag = "--metrics-secure="
	exemptUsersFlag   = "--secret-guard-exempt-users="
	// The manager's log flags: controller-runtime's zap flags.
	logLevelFlag       = "--zap-log-level="
	logFormatFlag      = "--zap-encoder="
	exemptCondition    = "not-exempt"
	webhookPolicy      = "cos-externalizer-webhook" // the NetworkPolicy of the webhook port
	managedByLabel     = "app.kubernetes.io/managed-by"
	resourcePolicy     = "helm.sh/resource-policy"
	systemNSFlag       = "--system-namespace="
	kustomizeManagedBy = "kustomize"
)

// The manager's caller authentication, as the component config/components/webhook-client-ca mounts
// it (webhookClientCA; the tests render the chart against the component).
const (
	clientCAVolume    = "webhook-client-ca"
	clientCAMountPath = "/etc/cos-externalizer/webhook-client-ca"
	clientCAFlag      = "--webhook-client-ca="
	clientNamesFlag   = "--webhook-client-names="
)

// ModeObjects are the objects one mode's overlay renders, and those its monitoring overlay renders.
type ModeObjects struct {
	Mode       string
	Objects    []map[string]any
	Monitoring []map[string]any
}

// Input is what Generate needs: every mode's renderings (in Modes' order), the namespace to replace
// and the chart's version.
type Input struct {
	Modes     []ModeObjects
	Namespace string
	Version   string
	// Registry is the default image.repository: the published image (empty: the overlays' own).
	Registry string
}

// defaults are the values the overlays hold, which values.yaml repeats.
type defaults struct {
	Replicas          int64
	Repository, Tag   string
	Digest            string
	PullPolicy        string
	Resources         any
	NodeSelector      any
	Tolerations       any
	Affinity          any
	PriorityClassName string
	MetricsPort       int64
	MetricsSecure     bool
	MinAvailable      any
}

// Generate returns the chart's files by path: Chart.yaml, values.yaml, values.schema.json,
// templates/_helpers.tpl, templates/NOTES.txt and a template per object.
func Generate(in Input) (map[string][]byte, error) {
	if len(in.Modes) == 0 {
		return nil, errors.New("no mode rendered")
	}
	var def *defaults
	for _, m := range in.Modes {
		d, err := readDefaults(m.Objects)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m.Mode, err)
		}
		if def != nil && !equalJSON(def, d) {
			return nil, fmt.Errorf("mode %s: the manager's Deployment differs from mode %s's in a value (replicas, image, resources, scheduling or metrics)", m.Mode, in.Modes[0].Mode)
		}
		def = d
	}

	type variant struct {
		modes []string
		text  string
	}
	type entry struct {
		file       string
		monitoring bool
		cond       string // a value the object is rendered under, by its kind
		present    []string
		variants   []*variant
	}
	entries := map[string]*entry{}
	var order []string
	files := map[string]bool{}
	for _, m := range in.Modes {
		exempt, err := exemptUsers(m.Objects)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m.Mode, err)
		}
		for _, monitoring := range []bool{false, true} {
			objs := m.Objects
			if monitoring {
				objs = m.Monitoring
			}
			for _, obj := range objs {
				if str(obj, "kind") == "Namespace" {
					continue // the release's namespace is Helm's (--create-namespace), not the chart's
				}
				key := objectKey(obj)
				text, err := templatize(obj, in.Namespace, exempt)
				if err != nil {
					return nil, fmt.Errorf("mode %s: %s: %w", m.Mode, key, err)
				}
				e, ok := entries[key]
				if !ok {
					e = &entry{file: fileName(obj, files), monitoring: monitoring, cond: kindConditions[str(obj, "kind")]}
					entries[key] = e
					order = append(order, key)
				}
				if slices.Contains(e.present, m.Mode) || e.monitoring != monitoring {
					return nil, fmt.Errorf("mode %s renders %s twice", m.Mode, key)
				}
				e.present = append(e.present, m.Mode)
				i := slices.IndexFunc(e.variants, func(v *variant) bool { return v.text == text })
				if i < 0 {
					e.variants = append(e.variants, &variant{text: text})
					i = len(e.variants) - 1
				}
				e.variants[i].modes = append(e.variants[i].modes, m.Mode)
			}
		}
	}

	out := map[string][]byte{}
	for _, key := range order {
		e := entries[key]
		var b strings.Builder
		b.WriteString(generatedHeader)
		if e.monitoring {
			b.WriteString("{{- if .Values.metrics.serviceMonitor.enabled }}\n")
		}
		if e.cond != "" {
			fmt.Fprintf(&b, "{{- if %s }}\n", e.cond)
		}
		if len(e.present) < len(in.Modes) {
			fmt.Fprintf(&b, "{{- if %s }}\n", modeCondition(e.present))
		}
		var merged []line
		for _, v := range e.variants {
			merged = mergeLines(merged, strings.Split(strings.TrimSuffix(v.text, "\n"), "\n"), v.modes)
		}
		b.WriteString(guardLines(merged, e.present))
		if len(e.present) < len(in.Modes) {
			b.WriteString("{{- end }}\n")
		}
		if e.cond != "" {
			b.WriteString("{{- end }}\n")
		}
		if e.monitoring {
			b.WriteString("{{- end }}\n")
		}
		out["templates/"+e.file] = []byte(b.String())
	}

	appVersion := def.Tag
	if appVersion == "" {
		appVersion = in.Version
	}
	out["Chart.yaml"] = []byte(fmt.Sprintf(chartYAML, in.Version, strconv.Quote(appVersion)))
	if in.Registry != "" {
		def.Repository = in.Registry
	}
	hook, err := uninstallHook(in.Modes)
	if err != nil {
		return nil, err
	}
	if hook != nil {
		out["templates/uninstall-hook.yaml"] = hook
	}
	values, err := valuesYAML(def)
	if err != nil {
		return nil, err
	}
	out["values.yaml"] = values
	readme, err := chartReadme(values)
	if err != nil {
		return nil, err
	}
	out["README.md"] = readme
	schema, err := valuesSchema()
	if err != nil {
		return nil, err
	}
	out["values.schema.json"] = schema
	out["templates/_helpers.tpl"] = []byte(helpers + nameHelpers)
	out["templates/NOTES.txt"] = []byte(notes)
	out["icon.svg"] = []byte(icon)
	return out, nil
}

// kindConditions are the values that turn the objects of a kind off.
var kindConditions = map[string]string{
	"CustomResourceDefinition": ".Values.crds.enabled",
	"PodDisruptionBudget":      ".Values.podDisruptionBudget.enabled",
}

// line is a line of an object's template and the modes whose rendering has it.
type line struct {
	text  string
	modes []string
}

// mergeLines merges the lines of another variant, rendered by modes, into merged: the lines both
// have (a longest common subsequence) are kept once, the others are added where they are. Each
// variant's lines stay in their order, so guarding each line with its modes gives back every
// variant.
func mergeLines(merged []line, lines []string, modes []string) []line {
	n, m := len(merged), len(lines)
	// lcs[i][j]: the longest common subsequence of merged[i:] and lines[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if merged[i].text == lines[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []line
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && merged[i].text == lines[j]:
			out = append(out, line{merged[i].text, append(slices.Clone(merged[i].modes), modes...)})
			i, j = i+1, j+1
		case j == m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, merged[i])
			i++
		default:
			out = append(out, line{lines[j], modes})
			j++
		}
	}
	return out
}

// guardLines writes merged lines, each run of lines that not all of present have guarded by its
// modes. The guards trim the newline before them, so each mode renders its own lines as they were.
func guardLines(merged []line, present []string) string {
	var b strings.Builder
	for i := 0; i < len(merged); {
		modes := sortedModes(merged[i].modes, present)
		j := i
		for j < len(merged) && slices.Equal(sortedModes(merged[j].modes, present), modes) {
			j++
		}
		guarded := len(modes) < len(present)
		if guarded {
			fmt.Fprintf(&b, "{{- if %s }}\n", modeCondition(modes))
		}
		for _, l := range merged[i:j] {
			b.WriteString(l.text)
			b.WriteByte('\n')
		}
		if guarded {
			b.WriteString("{{- end }}\n")
		}
		i = j
	}
	return b.String()
}

// sortedModes returns modes in the order of all.
func sortedModes(modes, all []string) []string {
	var out []string
	for _, m := range all {
		if slices.Contains(modes, m) {
			out = append(out, m)
		}
	}
	return out
}

const generatedHeader = "# Generated by hack/gen/helmgen from config/ (make chart): do not edit.\n"

// modeCondition is the template condition that holds in the given modes.
func modeCondition(modes []string) string {
	if len(modes) == 1 {
		return fmt.Sprintf("eq .Values.mode %q", modes[0])
	}
	q := make([]string, len(modes))
	for i, m := range modes {
		q[i] = strconv.Quote(m)
	}
	return fmt.Sprintf("has .Values.mode (list %s)", strings.Join(q, " "))
}

// objectKey names an object across modes: group, kind, namespace and name.
func objectKey(obj map[string]any) string {
	group, _, _ := strings.Cut(str(obj, "apiVersion"), "/")
	if !strings.Contains(str(obj, "apiVersion"), "/") {
		group = ""
	}
	return fmt.Sprintf("%s/%s/%s/%s", group, str(obj, "kind"), str(obj, "metadata", "namespace"), str(obj, "metadata", "name"))
}

// fileName is a template's file name, kind-name.yaml, unique among taken.
func fileName(obj map[string]any, taken map[string]bool) string {
	base := strings.ToLower(str(obj, "kind") + "-" + str(obj, "metadata", "name"))
	base = regexp.MustCompile(`[^a-z0-9.-]+`).ReplaceAllString(base, "-")
	name := base + ".yaml"
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s-%d.yaml", base, i)
	}
	taken[name] = true
	return name
}

// managerDeployment finds the Deployment with the manager container, and that container.
func managerDeployment(objs []map[string]any) (map[string]any, map[string]any) {
	for _, obj := range objs {
		if str(obj, "kind") != "Deployment" {
			continue
		}
		if c := managerOf(obj); c != nil {
			return obj, c
		}
	}
	return nil, nil
}

func managerOf(deploy map[string]any) map[string]any {
	containers, _ := get(deploy, "spec", "template", "spec", "containers").([]any)
	for _, c := range containers {
		if c, ok := c.(map[string]any); ok && c["name"] == managerContainer {
			return c
		}
	}
	return nil
}

// readDefaults reads the values of one mode's rendering.
func readDefaults(objs []map[string]any) (*defaults, error) {
	deploy, c := managerDeployment(objs)
	if deploy == nil {
		return nil, fmt.Errorf("no Deployment with a container %q", managerContainer)
	}
	d := &defaults{MetricsSecure: true}
	replicas, ok := get(deploy, "spec", "replicas").(int64)
	if !ok {
		return nil, errors.New("the manager's Deployment has no replicas")
	}
	d.Replicas = replicas
	var err error
	if d.Repository, d.Tag, d.Digest, err = ParseImage(str(c, "image")); err != nil {
		return nil, err
	}
	d.PullPolicy = str(c, "imagePullPolicy")
	d.Resources = c["resources"]
	pod := get(deploy, "spec", "template", "spec").(map[string]any)
	d.NodeSelector, d.Tolerations, d.Affinity = pod["nodeSelector"], pod["tolerations"], pod["affinity"]
	d.PriorityClassName, _ = pod["priorityClassName"].(string)
	args, _ := c["args"].([]any)
	bind := ""
	for _, a := range args {
		s, _ := a.(string)
		if v, ok := strings.CutPrefix(s, metricsBindFlag); ok {
			bind = v
		}
		if v, ok := strings.CutPrefix(s, metricsSecureFlag); ok {
			if d.MetricsSecure, err = strconv.ParseBool(v); err != nil {
				return nil, fmt.Errorf("%s: %w", metricsSecureFlag, err)
			}
		}
	}
	for _, obj := range objs {
		if str(obj, "kind") == "PodDisruptionBudget" {
			d.MinAvailable = get(obj, "spec", "minAvailable")
		}
	}
	_, port, ok := strings.Cut(bind, ":")
	if d.MetricsPort, err = strconv.ParseInt(port, 10, 32); !ok || err != nil {
		return nil, fmt.Errorf("the manager's %s%q is not host:port", metricsBindFlag, bind)
	}
	return d, nil
}

// ParseImage splits an image reference into repository, tag and digest.
func ParseImage(ref string) (repository, tag, digest string, err error) {
	rest, digest, _ := strings.Cut(ref, "@")
	repository = rest
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		repository, tag = rest[:i], rest[i+1:]
	}
	if repository == "" || strings.ContainsAny(ref, " \t\n") || strings.HasSuffix(rest, ":") || (digest == "" && strings.Contains(ref, "@")) {
		return "", "", "", fmt.Errorf("image %q is not a reference", ref)
	}
	return repository, tag, digest, nil
}

// exemptList matches the secret guard's exemption matchCondition and captures its list of users.
var exemptList = regexp.MustCompile(`^!\(request\.userInfo\.username in \[(.*)\]\)$`)

// ParseExemptUsers returns the users of the secret guard's exemption expression,
// !(request.userInfo.username in ['a', 'b']).
func ParseExemptUsers(expr string) ([]string, error) {
	m := exemptList.FindStringSubmatch(strings.TrimSpace(expr))
	if m == nil {
		return nil, fmt.Errorf("matchCondition %s is not !(request.userInfo.username in [...])", exemptCondition)
	}
	var users []string
	for item := range strings.SplitSeq(m[1], ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if len(item) < 2 || item[0] != '\'' || item[len(item)-1] != '\'' || strings.ContainsAny(item[1:len(item)-1], `'"\`) {
			return nil, fmt.Errorf("matchCondition %s: an item is not a plain quoted user", exemptCondition)
		}
		users = append(users, item[1:len(item)-1])
	}
	return users, nil
}

// exemptUsers returns the users the secret guard's exemption lists in one mode (nil without one).
func exemptUsers(objs []map[string]any) ([]string, error) {
	for _, obj := range objs {
		if str(obj, "kind") != "ValidatingWebhookConfiguration" {
			continue
		}
		hooks, _ := obj["webhooks"].([]any)
		for _, h := range hooks {
			conds, _ := get(h, "matchConditions").([]any)
			for _, c := range conds {
				if c, ok := c.(map[string]any); ok && c["name"] == exemptCondition {
					return ParseExemptUsers(str(c, "expression"))
				}
			}
		}
	}
	return nil, nil
}

// placeholders collects what replaces each __HELM_n__ token of an object's YAML: a function of the
// line that holds it.
type placeholders []func(line, token string) string

func (p *placeholders) add(f func(line, token string) string) string {
	*p = append(*p, f)
	return fmt.Sprintf("__HELM_%d__", len(*p)-1)
}

// inline replaces the token with a template expression.
func (p *placeholders) inline(expr string) string {
	return p.add(func(line, token string) string { return strings.Replace(line, token, expr, 1) })
}

// optional replaces the line `key: token` with the key and the value at path, only when it is set:
// as a block (toYaml) or a scalar.
func (p *placeholders) optional(path string, block bool) string {
	return p.add(func(line, token string) string {
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		key, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		if block {
			return fmt.Sprintf("%[1]s{{- with %[2]s }}\n%[1]s%[3]s:\n%[1]s  {{- toYaml . | nindent %[4]d }}\n%[1]s{{- end }}",
				indent, path, key, len(indent)+2)
		}
		return fmt.Sprintf("%[1]s{{- with %[2]s }}\n%[1]s%[3]s: {{ . }}\n%[1]s{{- end }}", indent, path, key)
	})
}

// item replaces the list item `- token` with `- text` when cond holds.
func (p *placeholders) item(cond, text string) string {
	return p.add(func(line, token string) string {
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		return fmt.Sprintf("%[1]s{{- %[2]s }}\n%[1]s- %[3]s\n%[1]s{{- end }}", indent, cond, text)
	})
}

// ipBlocks replaces the line `key: token` (or the list item `- key: token`) with the key and an
// ipBlock peer per CIDR of the list at path, only when the list is not empty; the list item stays.
func (p *placeholders) ipBlocks(path string) string {
	return p.add(func(line, _ string) string {
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		rest := strings.TrimLeft(line, " ")
		keyIndent, open := indent, indent+"{{- with "+path+" }}"
		if item, ok := strings.CutPrefix(rest, "- "); ok {
			// The item's dash stays; its first key, when set, goes to the next line.
			rest, keyIndent, open = item, indent+"  ", indent+"-{{- with "+path+" }}"
		}
		key, _, _ := strings.Cut(rest, ":")
		return fmt.Sprintf("%[1]s\n%[2]s%[3]s:\n%[2]s{{- range . }}\n%[2]s- ipBlock:\n%[2]s    cidr: {{ . | quote }}\n%[2]s{{- end }}\n%[2]s{{- end }}",
			open, keyIndent, key)
	})
}

// block replaces the line `token: ""` of a map, or the list item `- token`, with the entries or
// items of the map or list at path, only when it is set.
func (p *placeholders) block(path string) string {
	return p.add(func(line, _ string) string {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		return fmt.Sprintf("%[1]s{{- with %[2]s }}\n%[1]s{{- toYaml . | nindent %[3]d }}\n%[1]s{{- end }}", strings.Repeat(" ", indent), path, indent)
	})
}

// entry replaces the line `token: ""` of a map with the line `text` when cond holds.
func (p *placeholders) entry(cond, text string) string {
	return p.add(func(line, _ string) string {
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		return fmt.Sprintf("%[1]s{{- %[2]s }}\n%[1]s%[3]s\n%[1]s{{- end }}", indent, cond, text)
	})
}

// labels replaces the line `token: ""` of metadata.labels with the labels Helm's charts carry.
func (p *placeholders) labels() string {
	return p.add(func(line, _ string) string {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		return fmt.Sprintf("%s{{- include \"cos-externalizer.labels\" . | nindent %d }}", strings.Repeat(" ", indent), indent)
	})
}

var tokenRE = regexp.MustCompile(`__HELM_[0-9]+__`)

// braces escapes the template delimiters of the overlays' own text (PrometheusRule annotations).
var braces = strings.NewReplacer("{{", `{{ "{{" }}`, "}}", `{{ "}}" }}`)

// templatize returns one object's template: the namespace replaced by the release's, the labels
// Helm's charts carry, and the values at their paths. exempt are the users of the mode's secret
// guard exemption.
func templatize(in map[string]any, namespace string, exempt []string) (string, error) {
	obj, err := deepCopy(in)
	if err != nil {
		return "", err
	}
	var p placeholders
	nsToken := p.inline("{{ .Release.Namespace }}")
	replaceNamespace(obj, namespace, nsToken)

	if labels, ok := get(obj, "metadata", "labels").(map[string]any); ok && labels[managedByLabel] == kustomizeManagedBy {
		delete(labels, managedByLabel)
		labels[p.labels()] = ""
	}

	switch str(obj, "kind") {
	case "CustomResourceDefinition":
		// crds.keep: the overlays' keep annotation only when it is set.
		if annotations, ok := get(obj, "metadata", "annotations").(map[string]any); ok && annotations[resourcePolicy] == "keep" {
			delete(annotations, resourcePolicy)
			annotations[p.entry("if .Values.crds.keep", resourcePolicy+": keep")] = ""
		}
	case "PodDisruptionBudget":
		if spec, ok := obj["spec"].(map[string]any); ok && spec["minAvailable"] != nil && spec["maxUnavailable"] == nil {
			spec["minAvailable"] = p.add(func(line, _ string) string {
				indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
				return fmt.Sprintf("%[1]s{{- with .Values.podDisruptionBudget.maxUnavailable }}\n%[1]smaxUnavailable: {{ . }}\n%[1]s{{- else }}\n%[1]sminAvailable: {{ .Values.podDisruptionBudget.minAvailable }}\n%[1]s{{- end }}", indent)
			})
		}
	case "Deployment":
		if c := managerOf(obj); c != nil {
			templatizeManager(obj, c, exempt, &p)
		}
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		hooks, _ := obj["webhooks"].([]any)
		for _, h := range hooks {
			conds, _ := get(h, "matchConditions").([]any)
			for _, c := range conds {
				if c, ok := c.(map[string]any); ok && c["name"] == exemptCondition {
					c["expression"] = p.inline(`"` + exemptExpression(str(c, "expression")) + `"`)
				}
			}
		}
	case "NetworkPolicy":
		if str(obj, "metadata", "name") == webhookPolicy {
			rules, _ := get(obj, "spec", "ingress").([]any)
			rule, ok := any(nil), false
			if len(rules) == 1 {
				rule = rules[0]
				_, ok = rule.(map[string]any)
			}
			if !ok || get(rule, "from") != nil {
				return "", errors.New("the webhook NetworkPolicy has not exactly one ingress rule, from anywhere, for networkPolicy.webhookIngressCIDRs to restrict")
			}
			rule.(map[string]any)["from"] = p.ipBlocks(".Values.networkPolicy.webhookIngressCIDRs")
		}
	case "PrometheusRule":
		if err := templatizeAlertSelector(obj, nsToken, &p); err != nil {
			return "", err
		}
	case "ServiceMonitor":
		endpoints, _ := get(obj, "spec", "endpoints").([]any)
		for _, e := range endpoints {
			if e, ok := e.(map[string]any); ok && e["scheme"] == "https" {
				e["scheme"] = p.inline(`{{ ternary "https" "http" .Values.metrics.secure }}`)
			}
		}
	}

	replaceNames(obj, &p)

	b, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for line := range strings.SplitSeq(strings.TrimSuffix(braces.Replace(string(b)), "\n"), "\n") {
		for {
			token := tokenRE.FindString(line)
			if token == "" {
				break
			}
			n, _ := strconv.Atoi(strings.Trim(token, "_HELM"))
			line = p[n](line, token)
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.String(), nil
}

// templatizeAlertSelector puts metrics.alertSelector into every alert expression in place of its
// first two quoted strings, the job and the namespace (already nsToken), as the replacements of
// config/prometheus/selector do.
func templatizeAlertSelector(obj map[string]any, nsToken string, p *placeholders) error {
	groups, _ := get(obj, "spec", "groups").([]any)
	for _, g := range groups {
		rules, _ := get(g, "rules").([]any)
		for _, r := range rules {
			r, ok := r.(map[string]any)
			if !ok || r["expr"] == nil {
				continue
			}
			parts := strings.Split(str(r, "expr"), `"`)
			if len(parts) < 5 || parts[3] != nsToken {
				return fmt.Errorf("alert %s: the expression's first two quoted strings are not the job and the namespace %s", str(r, "alert"), SystemNamespace)
			}
			parts[1] = p.inline(fmt.Sprintf(`{{ .Values.metrics.alertSelector.job | default %s }}`, fullnameDefault(parts[1])))
			parts[3] = p.inline(`{{ .Values.metrics.alertSelector.namespace | default .Release.Namespace }}`)
			r["expr"] = strings.Join(parts, `"`)
		}
	}
	return nil
}

// exemptExpression is the template of the exemption expression: the overlay's users, then
// secretGuard.extraExemptUsers, as a double-quoted YAML string.
func exemptExpression(expr string) string {
	i := strings.LastIndex(expr, "]")
	if i < 0 {
		i = len(expr)
	}
	return quoteYAML(braces.Replace(expr[:i])) + `{{ range .Values.secretGuard.extraExemptUsers }}, '{{ . }}'{{ end }}` + quoteYAML(braces.Replace(expr[i:]))
}

// quoteYAML escapes s for a double-quoted YAML string, without the quotes (templatize puts them
// around the whole expression).
func quoteYAML(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	q := strings.TrimSpace(b.String())
	return q[1 : len(q)-1]
}

// templatizeManager puts the values into the manager's Deployment and container.
func templatizeManager(deploy, c map[string]any, exempt []string, p *placeholders) {
	spec := deploy["spec"].(map[string]any)
	spec["replicas"] = p.inline("{{ .Values.replicas }}")
	pod := get(deploy, "spec", "template", "spec").(map[string]any)
	for key, block := range map[string]bool{"nodeSelector": true, "tolerations": true, "affinity": true, "priorityClassName": false} {
		pod[key] = p.optional(".Values."+key, block)
	}
	c["image"] = p.inline(`{{ include "cos-externalizer.image" . }}`)
	c["imagePullPolicy"] = p.optional(".Values.image.pullPolicy", false)
	c["resources"] = p.optional(".Values.resources", true)

	ports, _ := c["ports"].([]any)
	for _, port := range ports {
		if port, ok := port.(map[string]any); ok && port["name"] == metricsPortName {
			port["containerPort"] = p.inline("{{ .Values.metrics.port }}")
		}
	}
	args, _ := c["args"].([]any)
	secure, exemptFlag := false, false
	for i, a := range args {
		s, _ := a.(string)
		switch {
		case strings.HasPrefix(s, metricsBindFlag):
			host, _, _ := strings.Cut(strings.TrimPrefix(s, metricsBindFlag), ":")
			args[i] = p.inline(metricsBindFlag + host + ":{{ .Values.metrics.port }}")
		case strings.HasPrefix(s, metricsSecureFlag):
			args[i] = p.inline(metricsSecureFlag + "{{ .Values.metrics.secure }}")
			secure = true
		case strings.HasPrefix(s, exemptUsersFlag):
			args[i] = p.inline(braces.Replace(s) + "{{ range .Values.secretGuard.extraExemptUsers }},{{ . }}{{ end }}")
			exemptFlag = true
		}
	}
	// Caller authentication first, where the component config/components/webhook-client-ca adds it.
	args = append(args,
		p.item("with .Values.webhookClientCA.configMap", clientCAFlag+clientCAMountPath+"/{{ $.Values.webhookClientCA.key }}"),
		p.item("if and .Values.webhookClientCA.configMap .Values.webhookClientCA.names", clientNamesFlag+`{{ join "," .Values.webhookClientCA.names }}`))
	if !secure {
		args = append(args, p.item("if not .Values.metrics.secure", metricsSecureFlag+"false"))
	}
	if !exemptFlag && exempt != nil {
		args = append(args, p.item("with .Values.secretGuard.extraExemptUsers",
			exemptUsersFlag+braces.Replace(strings.Join(exempt, ","))+"{{ range . }},{{ . }}{{ end }}"))
	}
	args = append(args, renamedArgs(p))
	for _, flag := range []struct{ value, flag string }{{"logLevel", logLevelFlag}, {"logFormat", logFormatFlag}} {
		args = append(args, p.item("with .Values."+flag.value, flag.flag+"{{ . }}"))
	}
	args = append(args, p.item("range .Values.extraArgs", "{{ . | quote }}"))
	c["args"] = args
	env, _ := c["env"].([]any)
	c["env"] = append(env, p.block(".Values.extraEnv"))
	mounts, _ := c["volumeMounts"].([]any)
	c["volumeMounts"] = append(mounts, p.item("if .Values.webhookClientCA.configMap",
		fmt.Sprintf("{name: %s, mountPath: %s, readOnly: true}", clientCAVolume, clientCAMountPath)))
	volumes, _ := pod["volumes"].([]any)
	pod["volumes"] = append(volumes, p.item("with .Values.webhookClientCA.configMap",
		fmt.Sprintf("{name: %s, configMap: {name: {{ . | quote }}}}", clientCAVolume)))
	pod["imagePullSecrets"] = p.optional(".Values.imagePullSecrets", true)
	meta, _ := get(deploy, "spec", "template", "metadata").(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		get(deploy, "spec", "template").(map[string]any)["metadata"] = meta
	}
	for key, path := range map[string]string{"labels": ".Values.podLabels", "annotations": ".Values.podAnnotations"} {
		m, _ := meta[key].(map[string]any)
		if m == nil {
			m = map[string]any{}
			meta[key] = m
		}
		m[p.block(path)] = ""
	}
}

// replaceNamespace replaces the namespace in every string of obj with token, but in the secret
// guard's exemptions (users of other namespaces, such as OLM's, stay where they are).
func replaceNamespace(v any, namespace, token string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "matchConditions" {
				continue
			}
			if s, ok := e.(string); ok {
				v[k] = replaceIn(s, namespace, token)
			} else {
				replaceNamespace(e, namespace, token)
			}
		}
	case []any:
		for i, e := range v {
			if s, ok := e.(string); ok {
				if !strings.HasPrefix(s, exemptUsersFlag) {
					v[i] = replaceIn(s, namespace, token)
				}
			} else {
				replaceNamespace(e, namespace, token)
			}
		}
	}
}

// replaceIn replaces the namespace in s where it is a whole name, not part of a longer one.
func replaceIn(s, namespace, token string) string {
	re := regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(namespace) + `($|[^a-z0-9-])`)
	for re.MatchString(s) {
		s = re.ReplaceAllString(s, "${1}"+token+"${2}")
	}
	return s
}

func deepCopy(in map[string]any) (map[string]any, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// get walks maps by key.
func get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

// valuesYAML writes values.yaml with the overlays' values and comments.
func valuesYAML(d *defaults) ([]byte, error) {
	block := func(key string, v any, empty string) (string, error) {
		if v == nil {
			return key + ": " + empty + "\n", nil
		}
		b, err := yaml.Marshal(map[string]any{key: v})
		return string(b), err
	}
	var b strings.Builder
	fmt.Fprintf(&b, valuesHeader, Modes[0].Name, modeList())
	fmt.Fprintf(&b, "\n# Manager replicas: every one serves the webhooks, the elected one reconciles.\nreplicas: %d\n", d.Replicas)
	b.WriteString(nameValues)
	fmt.Fprintf(&b, "\n# The manager's image; a digest, when set, wins over the tag. The tag defaults to the chart's appVersion.\nimage:\n  repository: %s\n  tag: %q\n  digest: %q\n  # Always, IfNotPresent or Never; empty leaves it to Kubernetes.\n  pullPolicy: %q\n",
		d.Repository, "", d.Digest, d.PullPolicy)
	for _, v := range []struct {
		comment, key string
		value        any
		empty        string
	}{
		{"The manager container's requests and limits.", "resources", d.Resources, "{}"},
		{"Where the manager's pods run (null: anywhere).", "nodeSelector", d.NodeSelector, "{}"},
		{"Taints the manager's pods tolerate.", "tolerations", d.Tolerations, "[]"},
		{"Affinity of the manager's pods (they spread over zones and nodes already).", "affinity", d.Affinity, "{}"},
	} {
		s, err := block(v.key, v.value, v.empty)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\n# %s\n%s", v.comment, s)
	}
	fmt.Fprintf(&b, "\n# The manager pods' priorityClassName (empty: none).\npriorityClassName: %q\n", d.PriorityClassName)
	b.WriteString(`
# The secret guard refuses deleting, relabelling or disowning the object-data Secrets of live
# ClusterObjectSets to everyone but the manager and the users the mode's overlay exempts (the
# namespace controller). Users named here are exempt too: added to the guard's matchCondition
# not-exempt and to --secret-guard-exempt-users.
secretGuard:
  extraExemptUsers: []
`)
	b.WriteString(`
# The NetworkPolicies of the manager's pods (config/networkpolicy).
networkPolicy:
  # Address ranges (CIDRs) the webhook port (9443) admits: those of the API server as it reaches the
  # pods (its nodes, or its load balancer's or managed control plane's ranges). Empty: from anywhere,
  # which leaves the port to every pod of the cluster (docs/security.md). To empty it again with
  # --reuse-values: --set-json 'networkPolicy.webhookIngressCIDRs=[]' (=null keeps the ranges).
  webhookIngressCIDRs: []
`)
	b.WriteString(`
# Caller authentication of the webhook port (--webhook-client-ca), as the component
# config/components/webhook-client-ca: the manager serves only callers with a client certificate of
# the CA bundle in this ConfigMap of the release's namespace, which you create. The API server must
# present one (an AdmissionConfiguration kubeConfigFile): configure it first, or every admission is
# refused (docs/install.md, kubeadm and kind included). Empty: any client that reaches the port may
# call the webhooks, and the manager warns (log, metric, alert, kubectl cos check).
webhookClientCA:
  # The ConfigMap's name; empty: callers are not authenticated.
  configMap: ""
  # The key of the ConfigMap holding the PEM bundle.
  key: ca.crt
  # Common names or DNS names one of which the client certificate must carry
  # (--webhook-client-names; front-proxy-client with kubeadm's front-proxy CA); empty: any
  # certificate the bundle's CAs signed.
  names: []
`)
	fmt.Fprintf(&b, `
# Secrets with the credentials to pull the image from a private registry: [{name: ...}].
imagePullSecrets: []

# Labels and annotations added to the manager's pods.
podLabels: {}
podAnnotations: {}

# The manager's log level (debug, info or error: --zap-log-level) and format (json or console:
# --zap-encoder); empty: the manager's defaults, info and json.
logLevel: ""
logFormat: ""

# More arguments of the manager (docs/reference/manager-flags.md), after the chart's own: a flag given twice takes
# the last value.
extraArgs: []

# More environment variables of the manager container: [{name: ..., value: ...}].
extraEnv: []

# The PodDisruptionBudget of the manager's pods.
podDisruptionBudget:
  enabled: true
  # Used when maxUnavailable is empty.
  minAvailable: %[1]v
  # Wins over minAvailable when set (a number or a percentage).
  maxUnavailable: ""

# The ClusterObjectSet CRD (modes cert-manager and self-signed; webhook-only uses OLM's).
crds:
  # Install the CRD with the chart; false leaves it to you.
  enabled: true
  # Keep the CRD on helm uninstall (helm.sh/resource-policy: keep): deleting it deletes every
  # ClusterObjectSet.
  keep: true

# A pre-delete hook Job that runs "cos-externalizer uninstall" before helm uninstall deletes the
# chart: it deletes the webhook configurations and the manager, then releases the manager's
# teardown finalizer from every ClusterObjectSet without tearing anything down.
uninstallHook:
  enabled: true
`, d.MinAvailable)
	fmt.Fprintf(&b, `
# The metrics endpoint (/metrics) of every replica.
metrics:
  # Port of --metrics-bind-address and of the container port "metrics".
  port: %d
  # HTTPS for clients the API server authenticates and authorizes (ClusterRole
  # cos-externalizer-metrics-reader); false serves plain HTTP to anyone.
  secure: %t
  serviceMonitor:
    # The objects of config/prometheus: a ServiceMonitor and the PrometheusRule with the alerts
    # (the Prometheus Operator's CRDs must be installed).
    enabled: false
  alertSelector:
    # The job label that selects the manager's series in every alert expression, like a monitoring
    # mixin's selector or the component config/prometheus/selector; empty: the job the ServiceMonitor
    # gives the metrics Service.
    job: ""
    # The namespace label of the same selector; empty: the release's namespace.
    namespace: ""
`, d.MetricsPort, d.MetricsSecure)
	return []byte(b.String()), nil
}

func modeList() string {
	var s []string
	for _, m := range Modes {
		s = append(s, fmt.Sprintf("#   %-13s config/%s", m.Name, m.Overlay))
	}
	return strings.Join(s, "\n")
}

const valuesHeader = `# Values of the cos-externalizer chart, generated by hack/gen/helmgen from config/ (make chart): do
# not edit. The defaults install what the mode's overlay installs.

# Which overlay of config/ the chart installs:
%[2]s
# config/production is cert-manager with replicas: 3.
mode: %[1]s
`

// valuesSchema is values.schema.json.
func valuesSchema() ([]byte, error) {
	obj := func(props map[string]any) map[string]any {
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	}
	var modes []string
	for _, m := range Modes {
		modes = append(modes, m.Name)
	}
	// A label value the alert expressions quote: no quote, backslash or line break.
	labelValue := map[string]any{"type": "string", "pattern": `^[^"\\\n]*$`}
	intOrPercent := map[string]any{"type": []string{"integer", "string"}, "minimum": 0, "pattern": `^([0-9]+%?)?$`}
	user := map[string]any{"type": "string", "minLength": 1, "pattern": `^[^'"\\,{}]+$`}
	schema := obj(map[string]any{
		"mode":     map[string]any{"type": "string", "enum": modes},
		"replicas": map[string]any{"type": "integer", "minimum": 1},
		// What Service names may start with, leaving room for -webhook and -metrics.
		"nameOverride":     map[string]any{"type": "string", "maxLength": 55, "pattern": `^([a-z]([-a-z0-9]*[a-z0-9])?)?$`},
		"fullnameOverride": map[string]any{"type": "string", "maxLength": 55, "pattern": `^([a-z]([-a-z0-9]*[a-z0-9])?)?$`},
		"image": obj(map[string]any{
			"repository": map[string]any{"type": "string", "minLength": 1},
			"tag":        map[string]any{"type": "string"},
			"digest":     map[string]any{"type": "string", "pattern": `^([a-z0-9]+:[a-f0-9]{32,})?$`},
			"pullPolicy": map[string]any{"type": "string", "enum": []string{"", "Always", "IfNotPresent", "Never"}},
		}),
		"resources":         map[string]any{"type": []string{"object", "null"}},
		"nodeSelector":      map[string]any{"type": []string{"object", "null"}, "additionalProperties": map[string]any{"type": "string"}},
		"tolerations":       map[string]any{"type": []string{"array", "null"}, "items": map[string]any{"type": "object"}},
		"affinity":          map[string]any{"type": []string{"object", "null"}},
		"priorityClassName": map[string]any{"type": "string"},
		"secretGuard": obj(map[string]any{
			"extraExemptUsers": map[string]any{"type": "array", "items": user},
		}),
		"networkPolicy": obj(map[string]any{
			"webhookIngressCIDRs": map[string]any{"type": "array", "items": map[string]any{
				"type": "string", "pattern": `^([0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}|[0-9a-fA-F:]*:[0-9a-fA-F:.]*/[0-9]{1,3})$`}},
		}),
		"webhookClientCA":  clientCASchema(obj),
		"imagePullSecrets": map[string]any{"type": "array", "items": obj(map[string]any{"name": map[string]any{"type": "string", "minLength": 1}})},
		"podLabels":        map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
		"podAnnotations":   map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
		"logLevel":         map[string]any{"type": "string", "enum": []string{"", "debug", "info", "error"}},
		"logFormat":        map[string]any{"type": "string", "enum": []string{"", "json", "console"}},
		"extraArgs":        map[string]any{"type": "array", "items": map[string]any{"type": "string", "pattern": "^--[a-z]"}},
		"extraEnv":         map[string]any{"type": "array", "items": map[string]any{"type": "object", "required": []string{"name"}}},
		"podDisruptionBudget": obj(map[string]any{
			"enabled":        map[string]any{"type": "boolean"},
			"minAvailable":   intOrPercent,
			"maxUnavailable": intOrPercent,
		}),
		"crds":          obj(map[string]any{"enabled": map[string]any{"type": "boolean"}, "keep": map[string]any{"type": "boolean"}}),
		"uninstallHook": obj(map[string]any{"enabled": map[string]any{"type": "boolean"}}),
		"metrics": obj(map[string]any{
			"port":           map[string]any{"type": "integer", "minimum": 1, "maximum": 65535},
			"secure":         map[string]any{"type": "boolean"},
			"serviceMonitor": obj(map[string]any{"enabled": map[string]any{"type": "boolean"}}),
			"alertSelector": obj(map[string]any{
				"job":       labelValue,
				"namespace": labelValue,
			}),
		}),
	})
	schema["$schema"] = "http://json-schema.org/draft-07/schema#"
	schema["required"] = []string{"mode", "replicas", "image", "metrics"}
	b, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// clientCASchema is the schema of webhookClientCA: a ConfigMap's name and key, names without commas,
// and names only with a ConfigMap (--webhook-client-names needs --webhook-client-ca).
func clientCASchema(obj func(map[string]any) map[string]any) map[string]any {
	s := obj(map[string]any{
		"configMap": map[string]any{"type": "string", "maxLength": 253, "pattern": `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$`},
		"key":       map[string]any{"type": "string", "minLength": 1, "maxLength": 253, "pattern": `^[-._a-zA-Z0-9]+$`},
		"names":     map[string]any{"type": "array", "items": map[string]any{"type": "string", "minLength": 1, "pattern": `^[^,\s]+$`}},
	})
	s["if"] = map[string]any{"required": []string{"names"}, "properties": map[string]any{"names": map[string]any{"minItems": 1}}}
	s["then"] = map[string]any{"required": []string{"configMap"}, "properties": map[string]any{"configMap": map[string]any{"minLength": 1}}}
	return s
}

const chartYAML = `# Generated by hack/gen/helmgen from config/ (make chart): do not edit.
apiVersion: v2
name: cos-externalizer
description: Externalizes the inline objects of ClusterObjectSets into immutable, content-addressed Secrets, and rolls ClusterObjectSets out.
type: application
version: %s
appVersion: %s
# matchConditions and preStop sleep.
kubeVersion: ">= 1.30.0-0"
keywords:
- olm
- clusterobjectset
home: https://github.com/cos-externalizer/cos-externalizer
sources:
- https://github.com/cos-externalizer/cos-externalizer
icon: https://raw.githubusercontent.com/cos-externalizer/cos-externalizer/main/charts/cos-externalizer/icon.svg
annotations:
  artifacthub.io/license: Apache-2.0
  artifacthub.io/category: integration-delivery
  artifacthub.io/links: |
    - name: Install
      url: https://github.com/cos-externalizer/cos-externalizer/blob/main/docs/install.md
    - name: Security
      url: https://github.com/cos-externalizer/cos-externalizer/blob/main/docs/security.md
  artifacthub.io/crds: |
    - kind: ClusterObjectSet
      version: v1
      name: clusterobjectsets.olm.operatorframework.io
      displayName: ClusterObjectSet
      description: A set of cluster objects rolled out in phases, its inline objects kept in Secrets.
`

// icon is the chart's icon (Chart.yaml's icon is its URL on GitHub).
const icon = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect x="4" y="4" width="56" height="56" rx="8" fill="#326ce5"/><path d="M18 20h28v6H18zm0 10h28v6H18zm0 10h18v6H18z" fill="#fff"/></svg>
`

const helpers = `{{/* Generated by hack/gen/helmgen (make chart): do not edit. */}}

{{/* The labels of every object, beside the overlays' own. */}}
{{- define "cos-externalizer.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
{{- end }}

{{/* The metadata of the uninstall hook's objects, but their hook-weight: deleted once the hook
succeeded or failed (Helm 3.18 and later delete the hooks made before a failed one too). */}}
{{- define "cos-externalizer.hookMetadata" }}
  labels:
    {{- include "cos-externalizer.labels" . | nindent 4 }}
    app.kubernetes.io/component: uninstall
    app.kubernetes.io/name: {{ include "cos-externalizer.name" . }}
    app.kubernetes.io/part-of: cos-externalizer
  annotations:
    helm.sh/hook: pre-delete
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded,hook-failed
{{- end }}

{{/* The manager's image: repository@digest, or repository:tag (the chart's appVersion by default). */}}
{{- define "cos-externalizer.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}
`

const notes = `cos-externalizer is installed in namespace {{ .Release.Namespace }}, mode {{ .Values.mode }}, with {{ .Values.replicas }} replicas of {{ include "cos-externalizer.image" . }}.

Check it:
  kubectl -n {{ .Release.Namespace }} rollout status deploy/{{ include "cos-externalizer.fullname" . }}
  kubectl cos check

Argo CD and Flux show a ClusterObjectSet as healthy as soon as it is stored, rolled out or not,
until they are told how to read its conditions: Argo CD's health check (argocd-cm
resource.customizations) and Flux's healthCheckExprs are in
https://github.com/cos-externalizer/cos-externalizer/blob/main/docs/gitops.md#health
{{- if eq .Values.mode "cert-manager" "webhook-only" }}
The webhooks' serving certificate comes from cert-manager (v1.19 or later), which must be installed.
{{- end }}
{{- if not .Values.webhookClientCA.configMap }}

WARNING: the webhook port (9443) accepts unauthenticated callers: anything that reaches it can send
the webhooks forged admission requests, which the manager acts on (it writes Secrets). Have the API
server present a client certificate to webhooks and set webhookClientCA.configMap to the ConfigMap
with its CA: https://github.com/cos-externalizer/cos-externalizer/blob/main/docs/install.md#authenticating-the-api-servers-calls-to-the-webhooks
Where the API server cannot be configured (managed control planes), restrict the port with
networkPolicy.webhookIngressCIDRs.
{{- else }}
The webhooks serve only callers with a client certificate of the CA in ConfigMap
{{ .Values.webhookClientCA.configMap }} (key {{ .Values.webhookClientCA.key }}): the API server must present one.
{{- end }}

Uninstalling keeps every workload:
  helm uninstall {{ .Release.Name }} -n {{ .Release.Namespace }}
{{- if .Values.uninstallHook.enabled }}
Its pre-delete hook (a Job of this image) deletes the webhook configurations and the manager, then
releases the manager's finalizer from every ClusterObjectSet, without tearing anything down.
{{- else }}
The uninstall hook is off (uninstallHook.enabled=false): first run
  kubectl cos uninstall -n {{ .Release.Namespace }}
or helm uninstall leaves the manager's finalizers on the ClusterObjectSets.
{{- end }}

What helm uninstall leaves, and what removes it once you no longer want it:
{{- if eq .Values.mode "webhook-only" }}
- In namespace {{ .Release.Namespace }} (OLM's: keep it, and OLM's ClusterObjectSets and object-data Secrets
  in it): the sweep's ConfigMap and quarantine copies, the leader Lease, and the CA and serving
  certificate Secrets cert-manager wrote{{ with .Values.webhookClientCA.configMap }}; and the client CA's ConfigMap {{ . }},
  which you created{{ end }}:
    kubectl -n {{ .Release.Namespace }} delete secrets -l cos-externalizer.io/quarantine=true
    kubectl -n {{ .Release.Namespace }} delete configmap cos-externalizer-orphan-sweep --ignore-not-found
    kubectl -n {{ .Release.Namespace }} delete lease cos-externalizer.olm.operatorframework.io --ignore-not-found
    kubectl -n {{ .Release.Namespace }} delete secret {{ include "cos-externalizer.fullname" . }}-ca {{ include "cos-externalizer.fullname" . }}-webhook-cert --ignore-not-found
{{- with .Values.webhookClientCA.configMap }}
    kubectl -n {{ $.Release.Namespace }} delete configmap {{ . }} --ignore-not-found
{{- end }}
{{- else }}
{{- if and .Values.crds.enabled .Values.crds.keep }}
- The CRD (crds.keep), still marked as this release's: helm install {{ .Release.Name }} -n {{ .Release.Namespace }}
  takes it over again; another release name or namespace needs --take-ownership.
{{- end }}
- The ClusterObjectSets and what they installed. Nothing reconciles them any more; their status
  stays as last written (Available True). "kubectl cos check" warns when no manager leads. To
  remove the ClusterObjectSets and keep what they installed, then the CRD (deleting the CRD first
  would delete every ClusterObjectSet and with it everything they installed):
    kubectl delete clusterobjectsets --all --cascade=orphan
    kubectl delete crd clusterobjectsets.olm.operatorframework.io
- In namespace {{ .Release.Namespace }}, which helm does not delete: the object-data Secrets (those the
  ClusterObjectSets use, and orphans no sweep deletes any more), the sweep's ConfigMap and
  quarantine copies, the leader Lease, and the {{ if eq .Values.mode "self-signed" }}CA Secret{{ else }}CA and serving certificate Secrets cert-manager wrote{{ end }}{{ with .Values.webhookClientCA.configMap }};
  and the client CA's ConfigMap {{ . }}, which you created{{ end }}:
    kubectl -n {{ .Release.Namespace }} delete secrets -l olm.operatorframework.io/revision-name
    kubectl -n {{ .Release.Namespace }} delete secrets -l cos-externalizer.io/quarantine=true
    kubectl -n {{ .Release.Namespace }} delete configmap cos-externalizer-orphan-sweep --ignore-not-found
    kubectl -n {{ .Release.Namespace }} delete lease cos-externalizer.olm.operatorframework.io --ignore-not-found
{{- if eq .Values.mode "self-signed" }}
    kubectl -n {{ .Release.Namespace }} delete secret {{ include "cos-externalizer.fullname" . }}-webhook-ca --ignore-not-found
{{- else }}
    kubectl -n {{ .Release.Namespace }} delete secret {{ include "cos-externalizer.fullname" . }}-ca {{ include "cos-externalizer.fullname" . }}-webhook-cert --ignore-not-found
{{- end }}
{{- with .Values.webhookClientCA.configMap }}
    kubectl -n {{ $.Release.Namespace }} delete configmap {{ . }} --ignore-not-found
{{- end }}
  or all of it with the namespace: kubectl delete namespace {{ .Release.Namespace }}
{{- end }}
`
