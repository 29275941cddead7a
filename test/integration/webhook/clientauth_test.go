package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// TestForgedAdmissionIsRefusedAtTheHandshake: with client authentication on (the local control
// plane's default), an AdmissionReview POSTed straight to the webhook port by a caller without the
// API server's client certificate fails its TLS handshake and writes no Secret, while the API
// server's own calls are served.
func TestForgedAdmissionIsRefusedAtTheHandshake(t *testing.T) {
	if manager.ClientCert == nil {
		t.Skip("the manager does not authenticate its callers (an existing cluster without a webhook client CA)")
	}
	ctx := context.Background()
	cos, err := builders.Bundle("forged-create", "argocd-install", "argocd")
	if err != nil {
		t.Fatal(err)
	}
	review := func(dryRun bool) []byte {
		raw, err := json.Marshal(cos)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       types.UID("forged-" + time.Now().Format("150405.000000")),
				Kind:      metav1.GroupVersionKind{Group: olmv1.GroupVersion.Group, Version: "v1", Kind: "ClusterObjectSet"},
				Resource:  metav1.GroupVersionResource{Group: olmv1.GroupVersion.Group, Version: "v1", Resource: "clusterobjectsets"},
				Name:      cos.Name,
				Operation: admissionv1.Create,
				UserInfo:  authenticationv1.UserInfo{Username: "forger"},
				Object:    runtime.RawExtension{Raw: raw},
				DryRun:    ptr.To(dryRun),
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A certificate of another CA, with the API server's name: the name alone opens nothing.
	otherCA, err := certs.NewCA("someone-elses-ca", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := otherCA.Issue(certs.Leaf{CommonName: controlplane.WebhookClientName, Usage: x509.ExtKeyUsageClientAuth, ValidFor: time.Hour, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	otherCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		tls    *tls.Config
		dryRun bool
		served bool
	}{
		"no client certificate":         {tls: manager.TLSConfig(false)},
		"certificate of another CA":     {tls: withCert(manager.TLSConfig(false), otherCert)},
		"no certificate, TLS 1.2":       {tls: maxTLS12(manager.TLSConfig(false))},
		"another CA, TLS 1.2":           {tls: maxTLS12(withCert(manager.TLSConfig(false), otherCert))},
		"the API server's, as dry run":  {tls: manager.TLSConfig(true), dryRun: true, served: true},
		"the API server's, TLS 1.2 dry": {tls: maxTLS12(manager.TLSConfig(true)), dryRun: true, served: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := systemSecrets(t)
			c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.tls}}
			defer c.CloseIdleConnections()
			resp, err := c.Post(manager.WebhookURL+webhook.MutatePath, "application/json", bytes.NewReader(review(tc.dryRun)))
			if !tc.served {
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					t.Fatalf("a forged review was served: %s %.200s", resp.Status, body)
				}
				t.Logf("refused: %v", err)
			} else {
				// The control: the same review, sent with the API server's certificate, reaches the
				// webhook (a dry run writes nothing either way).
				if err != nil {
					t.Fatalf("the API server's certificate was refused: %v", err)
				}
				var got admissionv1.AdmissionReview
				err := json.NewDecoder(resp.Body).Decode(&got)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || got.Response == nil {
					t.Fatalf("no admission response: %s, %v", resp.Status, err)
				}
			}
			if extra := added(before, systemSecrets(t)); len(extra) > 0 {
				t.Errorf("Secrets written in %s: %v", testenv.SystemNamespace, extra)
			}
		})
	}

	// Through the API server, which presents its certificate, a create is externalized as ever.
	apiCOS, err := builders.Bundle("clientauth-through-apiserver", "argocd-install", "argocd")
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.Env.Client.Create(ctx, apiCOS); err != nil {
		t.Fatalf("creating a ClusterObjectSet through the API server: %v", err)
	}
	t.Cleanup(func() { _ = testenv.Env.Client.Delete(ctx, apiCOS) })
	stored := getCOS(t, apiCOS.Name)
	if admission.CountInline(stored.Spec.Phases) != 0 {
		t.Errorf("the ClusterObjectSet created through the API server kept %d inline objects", admission.CountInline(stored.Spec.Phases))
	}
}

// withCert presents cert whatever CAs the server asks for (Certificates would withhold it from a
// server that does not name its issuer), as a forger would.
func withCert(cfg *tls.Config, cert tls.Certificate) *tls.Config {
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	return cfg
}

// maxTLS12: in TLS 1.2 the server refuses the client's certificate before the client's handshake
// ends; in TLS 1.3 after it.
func maxTLS12(cfg *tls.Config) *tls.Config {
	cfg.MaxVersion = tls.VersionTLS12
	return cfg
}
