package commands

import (
	"strings"
	"testing"
)

// TestClassifyTLS: each failure of the handshake between the API server (the client) and the
// manager is named for what it is: the manager's alerts (remote errors) are its refusal of the
// API server's client certificate, never an untrusted serving CA; the API server's own x509
// verification is about the serving certificate.
func TestClassifyTLS(t *testing.T) {
	const post = `Post "https://cos-externalizer-webhook.cos-system.svc:443/mutate?timeout=15s": `
	for name, tc := range map[string]struct {
		cause string
		want  tlsFailure
	}{
		"certificate required (TLS 1.3)": {post + "remote error: tls: certificate required", clientCertMissing},
		"unknown CA, the manager's":      {post + "remote error: tls: unknown certificate authority", clientCertUnknownCA},
		"expired, the manager's":         {post + "remote error: tls: expired certificate", clientCertExpired},
		"bad certificate":                {post + "remote error: tls: bad certificate", clientCertRefused},
		"unsupported certificate":        {post + "remote error: tls: unsupported certificate", clientCertRefused},
		"refused on a kept-alive connection": {
			"the server does not allow access to the requested resource (post clusterobjectsets.olm.operatorframework.io)", clientCertRefused},
		"unknown authority, the API server's": {post + "tls: failed to verify certificate: x509: certificate signed by unknown authority", servingUntrusted},
		"unknown authority, older wording":    {post + "x509: certificate signed by unknown authority (possibly because of ...)", servingUntrusted},
		"wrong name": {post + "tls: failed to verify certificate: x509: certificate is valid for other.olmv1-system.svc, not cos-externalizer-webhook.cos-system.svc",
			servingWrongName},
		"expired serving certificate": {post + "tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-11-27T00:00:00Z is after 2026-11-26T00:00:00Z",
			servingExpired},
		"protocol version":     {post + "remote error: tls: protocol version not supported", tlsHandshake},
		"handshake failure":    {post + "remote error: tls: handshake failure", tlsHandshake},
		"local handshake":      {post + "tls: no supported versions satisfy MinVersion and MaxVersion", tlsHandshake},
		"connection refused":   {post + "dial tcp 10.0.0.1:443: connect: connection refused", tlsNone},
		"deadline":             {post + "context deadline exceeded", tlsNone},
		"no endpoints":         {`no endpoints available for service "cos-externalizer-webhook"`, tlsNone},
		"a remote error first": {post + "remote error: tls: bad certificate (x509: certificate signed by unknown authority)", clientCertRefused},
	} {
		t.Run(name, func(t *testing.T) {
			if got := classifyTLS(tc.cause); got != tc.want {
				t.Errorf("classifyTLS(%q) = %d, want %d", tc.cause, got, tc.want)
			}
		})
	}
}

// TestExplainTLS: each failure's sentence says what failed and what to do, and a client
// certificate failure never sends on-call to the serving CA.
func TestExplainTLS(t *testing.T) {
	mode := installMode{Cert: certManager, InjectFrom: "cos-system/cos-externalizer-serving-cert", Host: "cos-externalizer-webhook.cos-system.svc"}
	for f, want := range map[tlsFailure][]string{
		clientCertMissing:   {"for want of a client certificate", "presented none for cos-externalizer-webhook.cos-system.svc", "give the user cos-externalizer-webhook.cos-system.svc (or *) a client certificate", "without --webhook-client-ca"},
		clientCertUnknownCA: {"no CA of the manager's --webhook-client-ca bundle signed it", "Put the CA that signs the API server's client certificate into the bundle's ConfigMap"},
		clientCertExpired:   {"it has expired", "Renew the API server's client certificate"},
		clientCertRefused:   {"refused the client certificate the API server presented", "--webhook-client-names", "logger webhook-client-ca"},
		servingUntrusted:    {"does not trust the serving certificate", "cainjector"},
		servingWrongName:    {"does not name cos-externalizer-webhook.cos-system.svc", "dnsNames of Certificate cos-system/cos-externalizer-serving-cert"},
		servingExpired:      {"has expired or is not valid yet", "renews Certificate cos-system/cos-externalizer-serving-cert"},
		tlsHandshake:        {"not over a certificate", "--tls-min-version"},
	} {
		got := explainTLS(f, "externalize.cos-externalizer.io", mode, "detail")
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("explainTLS(%d) = %q, want %q in it", f, got, w)
			}
		}
		isClient := f == clientCertMissing || f == clientCertUnknownCA || f == clientCertExpired || f == clientCertRefused
		if isClient && (strings.Contains(got, "cainjector") || !strings.Contains(got, "The serving CA is not the problem")) {
			t.Errorf("explainTLS(%d) sends on-call to the serving CA: %q", f, got)
		}
	}
}
