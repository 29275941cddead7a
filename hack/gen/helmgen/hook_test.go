package main

import (
	"strings"
	"testing"
)

func TestUninstallHook(t *testing.T) {
	webhooks := func(mutating, validating string) []map[string]any {
		return []map[string]any{
			{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": map[string]any{"name": mutating}},
			{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": map[string]any{"name": validating}},
		}
	}
	mode := func(name string, objs ...map[string]any) ModeObjects {
		return ModeObjects{Mode: name, Objects: append([]map[string]any{deployment()}, objs...)}
	}
	for name, tc := range map[string]struct {
		modes []ModeObjects
		// want are lines of the hook; none: no hook; err: an error naming it.
		want []string
		err  string
	}{
		"names from the overlays": {modes: []ModeObjects{mode("a", webhooks("m", "v")...)},
			want: []string{`- --deployment={{ include "cos-externalizer.fullname" . }}`, "- --mutating-webhook=m", "- --validating-webhook=v",
				"resourceNames: [m]", "resourceNames: [v]", `resourceNames: [{{ include "cos-externalizer.fullname" . }}]`,
				`name: {{ include "cos-externalizer.fullname" . }}-uninstall`, "kind: ClusterRoleBinding", "kind: RoleBinding"}},
		"a mode without one webhook configuration takes the others'": {modes: []ModeObjects{
			mode("a", webhooks("m", "v")...), mode("b", webhooks("m", "v")[1])}, want: []string{"- --mutating-webhook=m"}},
		"no webhook configurations: no hook": {modes: []ModeObjects{mode("a")}},
		"modes disagree":                     {modes: []ModeObjects{mode("a", webhooks("m", "v")...), mode("b", webhooks("m2", "v")...)}, err: `"m2"`},
		"no manager":                         {modes: []ModeObjects{{Mode: "a", Objects: webhooks("m", "v")}}, err: "no Deployment"},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := uninstallHook(tc.modes)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (b == nil) != (tc.want == nil) {
				t.Fatalf("hook %q, want lines %q", b, tc.want)
			}
			for _, l := range tc.want {
				if !strings.Contains(string(b), l) {
					t.Errorf("no %q in:\n%s", l, b)
				}
			}
			if strings.Contains(string(b), "HOOK") || strings.Contains(string(b), "DEPLOYMENT") {
				t.Errorf("a name left unreplaced:\n%s", b)
			}
		})
	}
}
