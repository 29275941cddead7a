package controlplane

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// WebhookClientName is the common name of the client certificate kube-apiserver presents to admission
// webhooks.
const WebhookClientName = "kube-apiserver-webhook-client"

// pki is the set of files the control plane authenticates with, written below dir.
type pki struct {
	CACert, CAKey           string // cluster CA: signs the serving and client certificates
	ServingCert, ServingKey string // kube-apiserver serving certificate for 127.0.0.1
	AdminCert, AdminKey     string // client certificate in system:masters
	SAKey, SAPub            string // service-account token signing key pair
	// WebhookClientCA signs WebhookClientCert: the certificate kube-apiserver presents to admission
	// webhooks (AdmissionConfiguration kubeConfigFile), which a manager verifies with
	// --webhook-client-ca.
	WebhookClientCA, WebhookClientCAKey string
	WebhookClientCert, WebhookClientKey string
	caPEM                               []byte
}

// newPKI creates a fresh CA, an API server serving certificate for the loopback address, a
// system:masters client certificate and a service-account key pair (RSA, for the widest
// compatibility with token verifiers).
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{
		CACert: filepath.Join(dir, "ca.crt"), CAKey: filepath.Join(dir, "ca.key"),
		ServingCert: filepath.Join(dir, "apiserver.crt"), ServingKey: filepath.Join(dir, "apiserver.key"),
		AdminCert: filepath.Join(dir, "admin.crt"), AdminKey: filepath.Join(dir, "admin.key"),
		SAKey: filepath.Join(dir, "sa.key"), SAPub: filepath.Join(dir, "sa.pub"),
		WebhookClientCA: filepath.Join(dir, "webhook-client-ca.crt"), WebhookClientCAKey: filepath.Join(dir, "webhook-client-ca.key"),
		WebhookClientCert: filepath.Join(dir, "webhook-client.crt"), WebhookClientKey: filepath.Join(dir, "webhook-client.key"),
	}
	now := time.Now()
	ca, err := certs.NewCA("cos-externalizer-local-ca", 10*365*24*time.Hour, now)
	if err != nil {
		return nil, err
	}
	p.caPEM = ca.PEM
	caKey, err := certs.EncodeKey(ca.Key)
	if err != nil {
		return nil, err
	}
	if err := writeFiles(map[string][]byte{p.CACert: ca.PEM, p.CAKey: caKey}); err != nil {
		return nil, err
	}
	for _, leaf := range []struct {
		what      string
		leaf      certs.Leaf
		cert, key string
	}{
		{"serving certificate", certs.Leaf{CommonName: "kube-apiserver", Usage: x509.ExtKeyUsageServerAuth,
			Hosts: []string{"127.0.0.1", serviceIP, "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}},
			p.ServingCert, p.ServingKey},
		{"admin certificate", certs.Leaf{CommonName: "admin", Organizations: []string{"system:masters"}, Usage: x509.ExtKeyUsageClientAuth},
			p.AdminCert, p.AdminKey},
	} {
		leaf.leaf.ValidFor, leaf.leaf.Now = 365*24*time.Hour, now
		cert, key, err := ca.Issue(leaf.leaf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", leaf.what, err)
		}
		if err := writeFiles(map[string][]byte{leaf.cert: cert, leaf.key: key}); err != nil {
			return nil, err
		}
	}

	// A CA of its own for the webhook client certificate: a manager that trusts it trusts only the API
	// server's admission calls, not every client of the cluster CA.
	webhookCA, err := certs.NewCA("cos-externalizer-local-webhook-client-ca", 10*365*24*time.Hour, now)
	if err != nil {
		return nil, err
	}
	webhookCAKey, err := certs.EncodeKey(webhookCA.Key)
	if err != nil {
		return nil, err
	}
	clientCert, clientKey, err := webhookCA.Issue(certs.Leaf{CommonName: WebhookClientName, Usage: x509.ExtKeyUsageClientAuth, ValidFor: 365 * 24 * time.Hour, Now: now})
	if err != nil {
		return nil, fmt.Errorf("webhook client certificate: %w", err)
	}
	if err := writeFiles(map[string][]byte{
		p.WebhookClientCA: webhookCA.PEM, p.WebhookClientCAKey: webhookCAKey,
		p.WebhookClientCert: clientCert, p.WebhookClientKey: clientKey,
	}); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPEM, err := certs.EncodeKey(saKey)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	return p, writeFiles(map[string][]byte{
		p.SAKey: saPEM,
		p.SAPub: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}),
	})
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
