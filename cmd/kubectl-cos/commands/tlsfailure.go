package commands

import (
	"fmt"
	"strings"
)

// tlsFailure is what failed in the TLS handshake between the API server and a webhook, read from the
// cause of a failed call: the API server is the client, the manager the server. An alert the manager
// sent is a "remote error" on the API server's side: the manager refused the API server's client
// certificate. An error of the API server's own verification names x509: it does not trust or
// accept the manager's serving certificate.
type tlsFailure int

const (
	tlsNone tlsFailure = iota
	// clientCertMissing: the manager requires a client certificate (--webhook-client-ca) and the API
	// server presented none (TLS 1.3's certificate_required alert).
	clientCertMissing
	// clientCertUnknownCA: the API server's client certificate is not signed by a CA of the manager's
	// bundle.
	clientCertUnknownCA
	// clientCertExpired: the API server's client certificate has expired (or is not valid yet).
	clientCertExpired
	// clientCertRefused: the manager refused the client certificate otherwise: its name is not among
	// --webhook-client-names, a certificate not for client authentication, or (TLS 1.2, whose alert
	// is the same) none presented; or, on a kept-alive connection, a bundle that no longer verifies it
	// (the manager answers 403, the only 403 its webhook server sends).
	clientCertRefused
	// servingUntrusted: the API server does not trust the CA of the manager's serving certificate.
	servingUntrusted
	// servingWrongName: the serving certificate does not name the host the API server calls.
	servingWrongName
	// servingExpired: the serving certificate has expired or is not valid yet.
	servingExpired
	// tlsHandshake: the handshake failed otherwise (TLS versions or cipher suites in common).
	tlsHandshake
)

// classifyTLS reads the TLS failure from the cause of a failed webhook call; tlsNone when it is not
// one. The manager's alerts come first: a "remote error" is never the API server's verification.
func classifyTLS(cause string) tlsFailure {
	switch {
	case strings.Contains(cause, "remote error: tls: certificate required"):
		return clientCertMissing
	case strings.Contains(cause, "remote error: tls: unknown certificate authority"):
		return clientCertUnknownCA
	case strings.Contains(cause, "remote error: tls: expired certificate"):
		return clientCertExpired
	case containsAny(cause, "remote error: tls: bad certificate", "remote error: tls: unsupported certificate",
		"remote error: tls: certificate revoked", "remote error: tls: unknown certificate", "remote error: tls: access denied",
		"client certificate of this connection is not trusted", "the server does not allow access to the requested resource"):
		return clientCertRefused
	case strings.Contains(cause, "remote error: tls: "):
		return tlsHandshake
	case containsAny(cause, "x509: certificate is valid for", "x509: certificate is not valid for any names"):
		return servingWrongName
	case strings.Contains(cause, "x509: certificate has expired or is not yet valid"):
		return servingExpired
	case containsAny(cause, "x509:", "certificate signed by unknown authority", "failed to verify certificate"):
		return servingUntrusted
	case strings.Contains(cause, "tls: "):
		return tlsHandshake
	}
	return tlsNone
}

// explainTLS is the sentence and the fix for a TLS failure calling webhook name, with the install's
// mode; detail is the API server's message.
func explainTLS(f tlsFailure, name string, mode installMode, detail string) string {
	host := "<service>.<namespace>.svc"
	if mode.Host != "" {
		host = mode.Host
	}
	apiServer := fmt.Sprintf("the API server's admission configuration (its kubeconfig for webhooks) must give the user %s (or *) a client certificate of a CA in the manager's --webhook-client-ca bundle: docs/install.md#authenticating-the-api-servers-calls-to-the-webhooks", host)
	switch f {
	case clientCertMissing:
		return fmt.Sprintf("Webhook %s refused the API server's call for want of a client certificate: the manager requires one (--webhook-client-ca) and the API server presented none for %s. The serving CA is not the problem. Fix the API server's side: %s. Until it presents one, run the manager without --webhook-client-ca (Helm: webhookClientCA.configMap unset) to admit again. (%s)", name, host, apiServer, detail)
	case clientCertUnknownCA:
		return fmt.Sprintf("Webhook %s refused the client certificate the API server presented: no CA of the manager's --webhook-client-ca bundle signed it. The serving CA is not the problem. Put the CA that signs the API server's client certificate into the bundle's ConfigMap (kept beside the old one while rotating), or give the API server a certificate of a CA in it (%s). (%s)", name, apiServer, detail)
	case clientCertExpired:
		return fmt.Sprintf("Webhook %s refused the client certificate the API server presented: it has expired (or is not valid yet). The serving CA is not the problem. Renew the API server's client certificate for webhooks (kubeadm: kubeadm certs renew front-proxy-client) and restart the API server. (%s)", name, detail)
	case clientCertRefused:
		return fmt.Sprintf("Webhook %s refused the client certificate the API server presented (or, over TLS 1.2, that it presented none): its name is not among the manager's --webhook-client-names, it is not a client certificate, or the bundle no longer verifies it. The serving CA is not the problem. The manager's log says which (logger webhook-client-ca); check --webhook-client-names and the API server's certificate for %s. (%s)", name, host, detail)
	case servingWrongName:
		dnsName, _, _ := strings.Cut(host, ":")
		return fmt.Sprintf("The API server does not accept the serving certificate of webhook %s: it does not name %s, the host the API server calls. %s (%s)", name, dnsName, mode.wrongName(), detail)
	case servingExpired:
		return fmt.Sprintf("The API server does not accept the serving certificate of webhook %s: it has expired or is not valid yet (or a clock is off). %s (%s)", name, mode.expired(), detail)
	case servingUntrusted:
		return fmt.Sprintf("The API server does not trust the serving certificate of webhook %s: the CA bundle in its configuration is not the CA that signed the manager's certificate. %s (%s)", name, mode.untrusted(), detail)
	case tlsHandshake:
		return fmt.Sprintf("The TLS handshake between the API server and webhook %s failed, not over a certificate: their TLS versions or cipher suites have none in common (the manager's --tls-profile, --tls-min-version, --tls-cipher-suites). (%s)", name, detail)
	}
	return ""
}
