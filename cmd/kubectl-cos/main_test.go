package main

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestAuthProviders: the kubeconfig auth providers kubectl knows are registered, so a kubeconfig
// that names one is not refused with "no Auth Provider found".
func TestAuthProviders(t *testing.T) {
	tests := map[string]struct {
		config map[string]string
		// says is in the provider's own error, if any; never "no Auth Provider found".
		says string
	}{
		"oidc":  {config: map[string]string{"idp-issuer-url": "https://issuer.example", "client-id": "kubectl", "id-token": "x"}},
		"gcp":   {says: "gke-gcloud-auth-plugin"},
		"azure": {says: "kubelogin"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := rest.GetAuthProvider("https://example:6443", &clientcmdapi.AuthProviderConfig{Name: name, Config: tc.config}, nil)
			switch {
			case err != nil && strings.Contains(err.Error(), "no Auth Provider found"):
				t.Fatalf("%s is not registered: %v", name, err)
			case tc.says == "" && err != nil:
				t.Fatalf("%s: %v", name, err)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Fatalf("%s: error %v, want one that says %q", name, err, tc.says)
			}
		})
	}
}
