package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReplaceNames: object names, and names inside flags, namespaced references and DNS names,
// follow the fullname; the name label follows nameOverride; what is not an object name stays.
func TestReplaceNames(t *testing.T) {
	const ns = "__HELM_0__"
	for name, tc := range map[string]struct{ in, want any }{
		"object name":          {map[string]any{"name": "cos-externalizer"}, map[string]any{"name": fullnameExpr}},
		"suffixed name":        {map[string]any{"name": "cos-externalizer-webhook-cert"}, map[string]any{"name": fullnameExpr + "-webhook-cert"}},
		"flag":                 {[]any{"--deployment=cos-externalizer"}, []any{"--deployment=" + fullnameExpr}},
		"namespaced reference": {map[string]any{"a": ns + "/cos-externalizer-serving-cert"}, map[string]any{"a": ns + "/" + fullnameExpr + "-serving-cert"}},
		"DNS name":             {[]any{"cos-externalizer-webhook." + ns + ".svc"}, []any{fullnameExpr + "-webhook." + ns + ".svc"}},
		"labels": {map[string]any{nameLabel: "cos-externalizer", partOfLabel: "cos-externalizer", "app.kubernetes.io/component": "manager"},
			map[string]any{nameLabel: nameExpr, partOfLabel: "cos-externalizer", "app.kubernetes.io/component": "manager"}},
		"not names": {
			[]any{"cos-externalizer.olm.operatorframework.io", "secret-guard.cos-externalizer.io", "cos-externalizerx",
				"https://github.com/cos-externalizer/cos-externalizer/blob/main/docs/runbook.md", "No cos-externalizer replica is up.",
				"cos-externalizer-", "x-cos-externalizer", map[string]any{"commonName": "cos-externalizer-webhook-ca"}},
			[]any{"cos-externalizer.olm.operatorframework.io", "secret-guard.cos-externalizer.io", "cos-externalizerx",
				"https://github.com/cos-externalizer/cos-externalizer/blob/main/docs/runbook.md", "No cos-externalizer replica is up.",
				"cos-externalizer-", "x-cos-externalizer", map[string]any{"commonName": "cos-externalizer-webhook-ca"}}},
		"matchConditions stay": {map[string]any{"matchConditions": []any{map[string]any{"name": "cos-externalizer"}}},
			map[string]any{"matchConditions": []any{map[string]any{"name": "cos-externalizer"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			var p placeholders
			p.inline("{{ .Release.Namespace }}") // the namespace's token, as templatize makes it first
			replaceNames(tc.in, &p)
			got := expand(tc.in, p)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// expand replaces the tokens replaceNames added (not the namespace's) with their expressions.
func expand(v any, p placeholders) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = expand(e, p)
		}
	case []any:
		for i, e := range v {
			v[i] = expand(e, p)
		}
	case string:
		return tokenRE.ReplaceAllStringFunc(v, func(token string) string {
			if token == "__HELM_0__" {
				return token
			}
			n, _ := strconv.Atoi(strings.Trim(token, "_HELM"))
			return p[n](token, token)
		})
	}
	return v
}

// FuzzFullname: templating a name only ever puts the token where the chart's name was; the rest of
// the string stays.
func FuzzFullname(f *testing.F) {
	for _, s := range []string{"cos-externalizer", "cos-externalizer-webhook.__HELM_0__.svc", "--deployment=cos-externalizer",
		"__HELM_0__/cos-externalizer-serving-cert", "cos-externalizer.olm.operatorframework.io", "a cos-externalizer b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		const token = "\x00"
		if strings.Contains(s, token) {
			t.Skip()
		}
		got := fullname(s, token)
		if back := strings.Replace(got, token, chartName, 1); back != s {
			t.Errorf("fullname(%q) = %q: not the input with the name replaced", s, got)
		}
		if n := strings.Count(got, token); n > 1 || (n == 1) != nameRE.MatchString(s) {
			t.Errorf("fullname(%q) = %q: %d tokens", s, got, n)
		}
	})
}
