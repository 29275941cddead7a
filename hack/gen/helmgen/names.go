package main

import (
	"fmt"
	"regexp"
	"strings"
)

// chartName is the chart's name, which every object of the overlays is named by or after.
const chartName = "cos-externalizer"

// The templates of the names: fullname replaces chartName in every object name, name is the value
// of the label app.kubernetes.io/name (nameOverride).
const (
	fullnameExpr = `{{ include "cos-externalizer.fullname" . }}`
	nameExpr     = `{{ include "cos-externalizer.name" . }}`
	// renamed holds when the names differ from the overlays', which the manager's flags and the
	// uninstall hook default to: the manager then gets them explicitly.
	renamedCond = `if ne (include "cos-externalizer.fullname" .) "` + chartName + `"`
	nameLabel   = "app.kubernetes.io/name"
	partOfLabel = "app.kubernetes.io/part-of"
)

// nameRE matches a string that holds an object's name, chartName or chartName-suffix: the whole
// string, after a flag's = or a namespace's / (cert-manager.io/inject-ca-from), or before the
// release namespace's DNS zone (name.__HELM_n__.svc). The Lease cos-externalizer.olm.operatorframework.io
// (the manager's, which no flag renames), webhook names (x.cos-externalizer.io) and URLs stay.
var nameRE = regexp.MustCompile(`^(.*[=/])?` + chartName + `(-[a-z0-9-]*[a-z0-9])?(\.__HELM_[0-9]+__\..*)?$`)

// fullname returns s with its object name templated (as nameRE finds it), or s.
func fullname(s, token string) string {
	m := nameRE.FindStringSubmatch(s)
	if m == nil {
		return s
	}
	return m[1] + token + m[2] + m[3]
}

// replaceNames templates every object name in v (fullnameOverride, nameOverride) and the label
// app.kubernetes.io/name; app.kubernetes.io/part-of (the product), certificates' commonName (what
// kubectl cos check recognises the self-signed CA by) and matchConditions (users of their own) stay.
func replaceNames(v any, p *placeholders) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			switch s, ok := e.(string); {
			case k == "matchConditions" || k == "commonName" || k == partOfLabel:
			case k == nameLabel && e == chartName:
				v[k] = p.inline(nameExpr)
			case ok:
				v[k] = fullnameIn(s, p)
			default:
				replaceNames(e, p)
			}
		}
	case []any:
		for i, e := range v {
			if s, ok := e.(string); ok {
				v[i] = fullnameIn(s, p)
			} else {
				replaceNames(e, p)
			}
		}
	}
}

func fullnameIn(s string, p *placeholders) string {
	if !nameRE.MatchString(s) {
		return s
	}
	return fullname(s, p.inline(fullnameExpr))
}

// renamedArgs is the manager's flags that name objects, rendered when the names are not the
// overlays' (their defaults): the webhook configurations, the webhook Service and the serving
// certificate's Secret (cert-manager's; the CA's in mode self-signed).
func renamedArgs(p *placeholders) string {
	return p.add(func(line, _ string) string {
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		var b strings.Builder
		fmt.Fprintf(&b, "%s{{- %s }}\n", indent, renamedCond)
		for _, a := range []string{
			"--webhook-configuration=" + fullnameExpr,
			"--webhook-service=" + fullnameExpr + "-webhook",
			"--webhook-cert-secret=" + fullnameExpr + `-webhook-{{ ternary "ca" "cert" (eq .Values.mode "self-signed") }}`,
		} {
			fmt.Fprintf(&b, "%s- %s\n", indent, a)
		}
		fmt.Fprintf(&b, "%s{{- end }}", indent)
		return b.String()
	})
}

// fullnameDefault is a template expression of name, chartName or chartName-suffix, as the names
// follow the overlays' (a quoted string for any other name).
func fullnameDefault(name string) string {
	if rest, ok := nameSuffix(name); ok {
		return fmt.Sprintf(`(printf "%%s%s" (include "cos-externalizer.fullname" .))`, rest)
	}
	return fmt.Sprintf("%q", name)
}

// hookName is the template of a name the uninstall hook gives or refers to.
func hookName(name string) string {
	if rest, ok := nameSuffix(name); ok {
		return fullnameExpr + rest
	}
	return name
}

// nameSuffix returns what follows chartName in name, when name is chartName or chartName-suffix.
func nameSuffix(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, chartName)
	return rest, ok && (rest == "" || rest[0] == '-')
}

// nameHelpers are the fullname and name templates of _helpers.tpl. Unlike most charts', the
// fullname is the chart's name, not prefixed with the release's, unless an override is set: the
// overlays name every object so, and the manager's flags and kubectl cos default to those names.
const nameHelpers = `
{{/* The value of app.kubernetes.io/name: nameOverride, or the chart's name. */}}
{{- define "cos-externalizer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* What every object's name is or starts with: fullnameOverride; with nameOverride, the release
name if it holds nameOverride, else both; else the chart's name, as the overlays name them. At most
55 characters, so that the longest Service name (fullname-webhook, fullname-metrics) is a DNS label. */}}
{{- define "cos-externalizer.fullname" -}}
{{- $name := .Chart.Name }}
{{- if .Values.fullnameOverride }}
{{- $name = .Values.fullnameOverride }}
{{- else if .Values.nameOverride }}
{{- $name = .Release.Name }}
{{- if not (contains .Values.nameOverride .Release.Name) }}
{{- $name = printf "%s-%s" .Release.Name .Values.nameOverride }}
{{- end }}
{{- end }}
{{- if gt (len $name) 55 }}
{{- fail (printf "the names' prefix %q (fullnameOverride, or the release name and nameOverride) is longer than 55 characters: the Services %s-webhook and %s-metrics must be DNS labels of at most 63" $name $name $name) }}
{{- end }}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $name) }}
{{- fail (printf "the names' prefix %q (fullnameOverride, or the release name and nameOverride) is not a DNS label that starts with a letter, as Service names must" $name) }}
{{- end }}
{{- $name }}
{{- end }}
`

// nameValues are the values of the names, in values.yaml.
const nameValues = `
# Every object's name is this or starts with it and a dash (cluster-scoped ones too: ClusterRoles and
# their bindings, the webhook configurations); empty: cos-externalizer, as the overlays name them.
# The manager's flags that name objects are then set to match; the leader election Lease keeps its
# name (the manager has none for it). At most 55 characters, a DNS label that starts with a letter.
fullnameOverride: ""
# The label app.kubernetes.io/name of every object (and the selectors of the manager's pods); when
# fullnameOverride is empty, the names are the release name and this (the release name alone when it
# holds this). Empty: cos-externalizer.
nameOverride: ""
`
