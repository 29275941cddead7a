package main

import (
	"strconv"
	"strings"
	"testing"
	"text/template"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// webhookPolicyObject is the webhook port's NetworkPolicy as config/networkpolicy renders it.
func webhookPolicyObject(from any) map[string]any {
	rule := map[string]any{"ports": []any{map[string]any{"port": int64(9443), "protocol": "TCP"}}}
	if from != nil {
		rule["from"] = from
	}
	return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "cos-externalizer-webhook", "namespace": "olmv1-system"},
		"spec": map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "cos-externalizer"}},
			"policyTypes": []any{"Ingress"},
			"ingress":     []any{rule},
		}}
}

// TestWebhookIngressCIDRs: networkPolicy.webhookIngressCIDRs restricts the webhook port's ingress to
// ipBlocks of its CIDRs; empty, the policy is the overlay's (from anywhere).
func TestWebhookIngressCIDRs(t *testing.T) {
	files, err := Generate(Input{Namespace: "olmv1-system", Version: "0.1.0", Modes: []ModeObjects{
		{Mode: "cert-manager", Objects: []map[string]any{deployment(), webhookPolicyObject(nil)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	text := string(files["templates/networkpolicy-cos-externalizer-webhook.yaml"])
	tmpl, err := template.New("np").Funcs(template.FuncMap{"quote": strconv.Quote,
		"include": func(string, any) string { return "cos-externalizer" }}).Parse(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	port := []any{map[string]any{"port": float64(9443), "protocol": "TCP"}}
	tests := map[string]struct {
		cidrs []string
		want  []any
	}{
		"empty: from anywhere": {want: []any{map[string]any{"ports": port}}},
		"one range": {cidrs: []string{"10.0.0.0/16"}, want: []any{map[string]any{"ports": port,
			"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/16"}}}}}},
		"IPv4 and IPv6": {cidrs: []string{"192.0.2.0/24", "2001:db8::/32"}, want: []any{map[string]any{"ports": port,
			"from": []any{
				map[string]any{"ipBlock": map[string]any{"cidr": "192.0.2.0/24"}},
				map[string]any{"ipBlock": map[string]any{"cidr": "2001:db8::/32"}},
			}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			values := map[string]any{"networkPolicy": map[string]any{"webhookIngressCIDRs": tc.cidrs}}
			if err := tmpl.Execute(&out, map[string]any{"Values": values, "Release": map[string]any{"Namespace": "ns"}}); err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := yaml.Unmarshal([]byte(out.String()), &got); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if diff := cmp.Diff(tc.want, get(got, "spec", "ingress")); diff != "" {
				t.Errorf("ingress (-want +got):\n%s\n%s", diff, out.String())
			}
		})
	}
	values := string(files["values.yaml"])
	if !strings.Contains(values, "\nnetworkPolicy:\n") || !strings.Contains(values, "  webhookIngressCIDRs: []\n") {
		t.Errorf("values.yaml lacks networkPolicy.webhookIngressCIDRs:\n%s", values)
	}
}

// TestWebhookIngressCIDRsRefusesARestrictedPolicy: an overlay whose webhook policy already restricts
// its peers, or has several rules, is not one the value can restrict.
func TestWebhookIngressCIDRsRefusesARestrictedPolicy(t *testing.T) {
	restricted := webhookPolicyObject([]any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}}})
	two := webhookPolicyObject(nil)
	two["spec"].(map[string]any)["ingress"] = append(two["spec"].(map[string]any)["ingress"].([]any), map[string]any{})
	for name, obj := range map[string]map[string]any{"already restricted": restricted, "two rules": two} {
		t.Run(name, func(t *testing.T) {
			_, err := Generate(Input{Namespace: "olmv1-system", Modes: []ModeObjects{{Mode: "cert-manager", Objects: []map[string]any{deployment(), obj}}}})
			if err == nil || !strings.Contains(err.Error(), "webhookIngressCIDRs") {
				t.Errorf("Generate: %v, want a refusal naming networkPolicy.webhookIngressCIDRs", err)
			}
		})
	}
}
