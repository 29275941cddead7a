package webhook

import (
	"os"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// TestGeneratedExemptionMatchesTheFlagDefault: the generated webhook configuration exempts exactly
// the default of --secret-guard-exempt-users, in the expression ExemptCondition writes, so the
// start-up check finds no difference on a default install.
func TestGeneratedExemptionMatchesTheFlagDefault(t *testing.T) {
	raw, err := os.ReadFile("../config/webhook/manifests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := yaml.Unmarshal([]byte(doc), wc); err != nil || wc.Kind != "ValidatingWebhookConfiguration" {
			continue
		}
		got, ok := exemptConditionOf(wc)
		if !ok {
			t.Fatalf("the secret guard has no matchCondition %q", ExemptConditionName)
		}
		if want := ExemptCondition([]string{NamespaceControllerUser}); got != want {
			t.Errorf("generated exemption %q, want %q", got, want)
		}
		found = true
	}
	if !found {
		t.Fatal("no ValidatingWebhookConfiguration in the generated manifests")
	}
}

func TestExemptCondition(t *testing.T) {
	tests := map[string]struct {
		users []string
		want  string
	}{
		"one":             {users: []string{"a"}, want: `!(request.userInfo.username in ['a'])`},
		"two":             {users: []string{"a", "b"}, want: `!(request.userInfo.username in ['a', 'b'])`},
		"quotes escaped":  {users: []string{`o'neil\x`}, want: `!(request.userInfo.username in ['o\'neil\\x'])`},
		"none: no one is": {users: nil, want: `!(request.userInfo.username in [])`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ExemptCondition(tc.users); got != tc.want {
				t.Errorf("ExemptCondition = %s, want %s", got, tc.want)
			}
		})
	}
}
