package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseImage(t *testing.T) {
	type ref struct{ Repository, Tag, Digest string }
	for in, want := range map[string]ref{
		"cos-externalizer:dev":                 {"cos-externalizer", "dev", ""},
		"cos-externalizer":                     {"cos-externalizer", "", ""},
		"registry:5000/team/cos:v1.2.3":        {"registry:5000/team/cos", "v1.2.3", ""},
		"registry:5000/team/cos":               {"registry:5000/team/cos", "", ""},
		"ghcr.io/cos@sha256:0123":              {"ghcr.io/cos", "", "sha256:0123"},
		"ghcr.io/cos:v1@sha256:0123":           {"ghcr.io/cos", "v1", "sha256:0123"},
		"localhost:5000/cos-externalizer:dev2": {"localhost:5000/cos-externalizer", "dev2", ""},
	} {
		r, tag, digest, err := ParseImage(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if diff := cmp.Diff(want, ref{r, tag, digest}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", in, diff)
		}
	}
	for _, in := range []string{"", ":dev", "cos:", "cos externalizer"} {
		if _, _, _, err := ParseImage(in); err == nil {
			t.Errorf("%q: parsed, want an error", in)
		}
	}
}

func FuzzParseImage(f *testing.F) {
	for _, s := range []string{"cos-externalizer:dev", "registry:5000/cos@sha256:00", "a:b:c", "@", "/:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, tag, digest, err := ParseImage(in)
		if err != nil {
			return
		}
		// The parts make the reference again.
		out := r
		if tag != "" {
			out += ":" + tag
		}
		if digest != "" || strings.Contains(in, "@") {
			out += "@" + digest
		}
		if out != in {
			t.Errorf("%q parsed into %q %q %q, which make %q", in, r, tag, digest, out)
		}
	})
}

func TestParseExemptUsers(t *testing.T) {
	for in, want := range map[string][]string{
		`!(request.userInfo.username in ['system:serviceaccount:kube-system:namespace-controller'])`: {"system:serviceaccount:kube-system:namespace-controller"},
		`!(request.userInfo.username in ['a', 'b'])`:                                                 {"a", "b"},
		`!(request.userInfo.username in ['a','b'])`:                                                  {"a", "b"},
		`!(request.userInfo.username in [])`:                                                         nil,
	} {
		got, err := ParseExemptUsers(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", in, diff)
		}
	}
	for _, in := range []string{`request.userInfo.username in ['a']`, `!(request.userInfo.username in [a])`, `!(request.userInfo.username in ['a'b'])`} {
		if _, err := ParseExemptUsers(in); err == nil {
			t.Errorf("%s: parsed, want an error", in)
		}
	}
}

func FuzzParseExemptUsers(f *testing.F) {
	f.Add(`!(request.userInfo.username in ['a', 'b'])`)
	f.Add(`!(request.userInfo.username in ['x'])`)
	f.Fuzz(func(t *testing.T, in string) {
		users, err := ParseExemptUsers(in)
		if err != nil {
			return
		}
		// The template's expression lists the same users again.
		var q []string
		for _, u := range users {
			q = append(q, "'"+u+"'")
		}
		again, err := ParseExemptUsers("!(request.userInfo.username in [" + strings.Join(q, ", ") + "])")
		if err != nil || !cmp.Equal(users, again) {
			t.Errorf("%q: users %q, listed again %q (%v)", in, users, again, err)
		}
	})
}

// deployment is a manager Deployment as the overlays render it, with the given extra args.
func deployment(args ...any) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "cos-externalizer", "namespace": "olmv1-system",
			"labels": map[string]any{"app.kubernetes.io/managed-by": "kustomize"}},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{
				"name": "manager", "image": "cos-externalizer:dev",
				"args":  append([]any{"--metrics-bind-address=:8443"}, args...),
				"ports": []any{map[string]any{"name": "metrics", "containerPort": int64(8443)}},
			}},
		}}},
	}
}

// guard is the secret guard's configuration exempting users, and calling the webhook Service.
func guard(users ...string) map[string]any {
	q := make([]string, len(users))
	for i, u := range users {
		q[i] = "'" + u + "'"
	}
	return map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": "cos-externalizer",
			"annotations": map[string]any{"cert-manager.io/inject-ca-from": "olmv1-system/cos-externalizer-serving-cert"}},
		"webhooks": []any{map[string]any{
			"name":            "secret-guard.cos-externalizer.io",
			"clientConfig":    map[string]any{"service": map[string]any{"name": "cos-externalizer-webhook", "namespace": "olmv1-system"}},
			"matchConditions": []any{map[string]any{"name": "not-exempt", "expression": "!(request.userInfo.username in [" + strings.Join(q, ", ") + "])"}},
		}},
	}
}

func service() map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "cos-externalizer-webhook", "namespace": "olmv1-system"}}
}

// TestGenerate: an object every mode renders alike is written once, unguarded; one that differs is
// written once, the lines that differ guarded by their modes; one some modes lack is guarded by those
// that have it; the namespace
// becomes the release's, kustomize's managed-by Helm's labels, the values land at their paths.
func TestGenerate(t *testing.T) {
	crd := map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "clusterobjectsets.olm.operatorframework.io"},
		"spec":     map[string]any{"description": "{{ not a template }}"}}
	files, err := Generate(Input{
		Namespace: "olmv1-system", Version: "0.1.0",
		Modes: []ModeObjects{
			{Mode: "cert-manager", Objects: []map[string]any{crd, service(), deployment("--webhook-cert-source=secret")}},
			{Mode: "self-signed", Objects: []map[string]any{crd, service(), deployment("--webhook-cert-source=self-signed")}},
			{Mode: "webhook-only", Objects: []map[string]any{service(), deployment("--webhook-cert-source=secret", "--rollout=false"),
				guard("system:serviceaccount:kube-system:namespace-controller", "system:serviceaccount:olmv1-system:operator-controller")}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"templates/service-cos-externalizer-webhook.yaml": {"namespace: {{ .Release.Namespace }}"},
		"templates/customresourcedefinition-clusterobjectsets.olm.operatorframework.io.yaml": {
			`{{- if has .Values.mode (list "cert-manager" "self-signed") }}`, `description: '{{ "{{" }} not a template {{ "}}" }}'`},
		"templates/deployment-cos-externalizer.yaml": {
			"{{- if has .Values.mode (list \"cert-manager\" \"webhook-only\") }}\n        - --webhook-cert-source=secret\n{{- end }}\n",
			"{{- if eq .Values.mode \"self-signed\" }}\n        - --webhook-cert-source=self-signed\n{{- end }}\n",
			"{{- if eq .Values.mode \"webhook-only\" }}\n        - --rollout=false\n{{- end }}\n",
			`{{- include "cos-externalizer.labels" . | nindent 4 }}`, "replicas: {{ .Values.replicas }}",
			`image: {{ include "cos-externalizer.image" . }}`, "- --metrics-bind-address=:{{ .Values.metrics.port }}",
			"containerPort: {{ .Values.metrics.port }}", "{{- with .Values.nodeSelector }}", "{{- with .Values.resources }}",
			// The flag lists the guard's users, when extraExemptUsers adds any.
			"{{- with .Values.secretGuard.extraExemptUsers }}\n        - --secret-guard-exempt-users=system:serviceaccount:kube-system:namespace-controller," +
				"system:serviceaccount:olmv1-system:operator-controller{{ range . }},{{ . }}{{ end }}\n"},
		// Users of other namespaces stay; the Service's namespace and the Certificate's are the release's.
		"templates/validatingwebhookconfiguration-cos-externalizer.yaml": {
			`{{- if eq .Values.mode "webhook-only" }}`,
			`cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "cos-externalizer.fullname" . }}-serving-cert`,
			// Webhook names are not object names.
			`name: secret-guard.cos-externalizer.io`,
			`namespace: {{ .Release.Namespace }}`,
			`- expression: "!(request.userInfo.username in ['system:serviceaccount:kube-system:namespace-controller', ` +
				`'system:serviceaccount:olmv1-system:operator-controller'{{ range .Values.secretGuard.extraExemptUsers }}, '{{ . }}'{{ end }}])"`,
		},
		"values.yaml": {"mode: cert-manager", "replicas: 2", "repository: cos-externalizer", "port: 8443"},
		"Chart.yaml":  {"version: 0.1.0", `appVersion: "dev"`},
	} {
		got := string(files[name])
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s lacks %q:\n%s", name, w, got)
			}
		}
	}
	if got := string(files["templates/service-cos-externalizer-webhook.yaml"]); strings.Contains(got, "if") {
		t.Errorf("the Service every mode renders alike is guarded:\n%s", got)
	}
	if got := strings.Count(string(files["templates/deployment-cos-externalizer.yaml"]), "kind: Deployment"); got != 1 {
		t.Errorf("the Deployment is written %d times, want once, its modes' differences guarded", got)
	}
}

// TestMergeLines: guarding the merged lines of the variants gives back each variant.
func TestMergeLines(t *testing.T) {
	variants := map[string][]string{
		"a": {"x", "1", "y", "2", "z"},
		"b": {"x", "y", "3", "z", "4"},
		"c": {"0", "x", "2", "z"},
	}
	var merged []line
	for _, mode := range []string{"a", "b", "c"} {
		merged = mergeLines(merged, variants[mode], []string{mode})
	}
	for mode, want := range variants {
		var got []string
		for _, l := range merged {
			if slices.Contains(l.modes, mode) {
				got = append(got, l.text)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("mode %s (-want +got):\n%s", mode, diff)
		}
	}
	shared := 0
	for _, l := range merged {
		if len(l.modes) == 3 {
			shared++
		}
	}
	if shared != 2 { // x and z
		t.Errorf("%d lines shared by every mode, want 2: %+v", shared, merged)
	}
}

// TestGenerateRefuses: modes whose manager differs in a value cannot share values.yaml.
func TestGenerateRefuses(t *testing.T) {
	other := deployment()
	other["spec"].(map[string]any)["replicas"] = int64(3)
	_, err := Generate(Input{Namespace: "olmv1-system", Modes: []ModeObjects{
		{Mode: "cert-manager", Objects: []map[string]any{deployment()}},
		{Mode: "self-signed", Objects: []map[string]any{other}},
	}})
	if err == nil {
		t.Fatal("generated, want an error")
	}
}

func FuzzMergeLines(f *testing.F) {
	f.Add("x\n1\ny", "x\ny\n3", "0\nx")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		variants := [][]string{strings.Split(a, "\n"), strings.Split(b, "\n"), strings.Split(c, "\n")}
		modes := []string{"a", "b", "c"}
		var merged []line
		for i, v := range variants {
			merged = mergeLines(merged, v, modes[i:i+1])
		}
		for i, want := range variants {
			var got []string
			for _, l := range merged {
				if slices.Contains(l.modes, modes[i]) {
					got = append(got, l.text)
				}
			}
			if !slices.Equal(want, got) {
				t.Errorf("mode %s: %q, want %q", modes[i], got, want)
			}
		}
	})
}
