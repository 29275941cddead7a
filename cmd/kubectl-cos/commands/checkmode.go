package commands

import (
	"fmt"
	"strings"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// How the webhook's certificate is served and trusted, as installed.
const (
	certManager    = "cert-manager"
	certSelfSigned = "self-signed"
	certSecret     = "secret"
	certDir        = "dir"
	rolloutUnknown = ""
	// selfSignedCAsCN is the subject of the self-signed mode's CA (certs/servingcert).
	selfSignedCAsCN = "cos-externalizer-webhook-ca"
	// localClusterCAsCN is the subject of the CA of `make run` (test/cmd/localcluster), whose manager
	// serves certificate files (--webhook-cert-dir) and is called by URL.
	localClusterCAsCN = "cos-externalizer-localcluster-ca"
)

// installation is what check read of the install.
type installation struct {
	// Deployment is the manager's Deployment ("namespace/name"), empty when not found (a manager run
	// elsewhere, webhooks called by URL, or not readable); Args are its manager container's args.
	Deployment string
	Args       []string
	// InjectFrom is cert-manager's inject-ca-from annotation of the webhook configurations.
	InjectFrom string
	// CACommonName is the subject of the first certificate of the CA bundles.
	CACommonName string
	// URL is the scheme and host the API server calls a webhook at, when it is called by URL rather
	// than through a Service (a manager outside the cluster).
	URL string
	// Host is the host the API server calls through the Service (<service>.<namespace>.svc, with
	// :port when not 443): the name the serving certificate must hold, and the user of the API
	// server's kubeconfig for webhooks.
	Host string
}

// installMode is the mode check gives advice for.
type installMode struct {
	// Cert is certManager, certSelfSigned, certSecret, certDir, or empty when not known.
	Cert string
	// Rollout is the manager's --rollout (true, false, auto), rolloutUnknown without its Deployment.
	Rollout string
	// CertSecret is the manager's --webhook-cert-secret, or its default for Cert.
	CertSecret string
	// InjectFrom is the Certificate cert-manager injects the CA of.
	InjectFrom string
	// Conflict says why the signals disagree; empty when they do not.
	Conflict string
	// URL is where the webhooks are called when by URL; LocalCluster: by `make run`'s manager.
	URL          string
	LocalCluster bool
	// Host is installation.Host.
	Host string
}

// detectMode reads the mode from the manager's args first, then from the webhook configurations'
// annotations and CA.
func detectMode(in installation) installMode {
	m := installMode{InjectFrom: in.InjectFrom, Rollout: rolloutUnknown, URL: in.URL, Host: in.Host}
	if in.Deployment == "" {
		switch {
		case in.InjectFrom != "":
			m.Cert = certManager
		case in.CACommonName == selfSignedCAsCN:
			m.Cert = certSelfSigned
		case in.CACommonName == localClusterCAsCN && in.URL != "":
			m.Cert, m.LocalCluster = certDir, true
		}
		return m
	}
	source := argValue(in.Args, "--webhook-cert-source")
	if source == "" {
		source = certs.SourceDir
	}
	m.Rollout = argValue(in.Args, "--rollout")
	if m.Rollout == "" {
		m.Rollout = "auto"
	}
	m.CertSecret = argValue(in.Args, "--webhook-cert-secret")
	switch {
	case source == certs.SourceSelfSigned:
		m.Cert = certSelfSigned
		if m.CertSecret == "" {
			m.CertSecret = certs.DefaultCASecret
		}
		if in.InjectFrom != "" {
			m.Conflict = fmt.Sprintf("the manager injects its own CA (--webhook-cert-source=self-signed) and the webhook configurations ask cert-manager to inject Certificate %s's: the two overwrite each other. Keep one: remove the annotation %s, or install the cert-manager overlay.", in.InjectFrom, injectCAAnnotation)
		}
	case in.InjectFrom != "":
		m.Cert = certManager
	case source == certs.SourceSecret:
		m.Cert = certSecret
	case source == certs.SourceDir:
		m.Cert = certDir
	}
	if m.Cert == certSecret || m.Cert == certManager && source == certs.SourceSecret {
		if m.CertSecret == "" {
			m.CertSecret = certs.DefaultCertSecret
		}
	}
	return m
}

// argValue is the value of a flag in args (--flag=value or --flag value), empty when not given.
func argValue(args []string, flag string) string {
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, flag+"="):
			return strings.TrimPrefix(a, flag+"=")
		case a == flag && i+1 < len(args):
			return args[i+1]
		}
	}
	return ""
}

// describe says the mode in a sentence.
func (m installMode) describe() string {
	var cert string
	switch m.Cert {
	case certManager:
		cert = fmt.Sprintf("cert-manager issues the serving certificate and its cainjector injects the CA of Certificate %s", m.InjectFrom)
	case certSelfSigned:
		cert = "self-signed: the manager keeps its CA (--webhook-cert-source=self-signed) and injects it into the webhook configurations"
	case certSecret:
		cert = fmt.Sprintf("the manager serves the certificate of Secret %s (--webhook-cert-source=secret) and the CA bundles are set by hand", m.CertSecret)
	case certDir:
		cert = "the manager serves the certificate files of --webhook-cert-dir and the CA bundles are set by hand"
		if m.LocalCluster {
			cert = fmt.Sprintf("make run's manager, outside the cluster at %s, serves the certificate files of --webhook-cert-dir, whose CA make run set in the webhook configurations", m.URL)
		}
	case "":
		cert = "how the serving certificate is made is not known (the manager's Deployment was not found)"
		if m.URL != "" {
			cert = fmt.Sprintf("the webhooks are called by URL (%s), not through a Service: a manager outside the cluster serves them, and how its certificate is made is not known", m.URL)
		}
	}
	switch m.Rollout {
	case "false":
		return "Mode: webhook-only (--rollout=false: another reconciler, OLM's operator-controller, rolls ClusterObjectSets out); " + cert + "."
	case "true":
		return "Mode: the manager rolls ClusterObjectSets out (--rollout=true); " + cert + "."
	case "auto":
		return "Mode: the manager rolls ClusterObjectSets out unless OLM's operator-controller does (--rollout=auto); " + cert + "."
	}
	return "Mode: " + cert + "."
}

// untrusted is the advice when the CA bundle is not the CA of the serving certificate.
func (m installMode) untrusted() string {
	switch m.Cert {
	case certManager:
		return fmt.Sprintf("Check that cert-manager's cainjector is running and that Certificate %s is Ready.", m.InjectFrom)
	case certSelfSigned:
		return "The manager that leads injects its CA: check that a replica holds the leader Lease and its log for the injection, and that its ServiceAccount may patch the webhook configurations (config/rbac/ca-injector)."
	case certSecret:
		return fmt.Sprintf("Set each webhook's clientConfig.caBundle to the CA that signed the certificate of Secret %s.", m.CertSecret)
	case certDir:
		return "Set each webhook's clientConfig.caBundle to the CA that signed the certificate in the manager's --webhook-cert-dir."
	}
	return "With cert-manager, check that cainjector is running and that the Certificate is Ready; in the self-signed mode, that the manager leads and injects its CA; otherwise set clientConfig.caBundle to the CA that signed the manager's certificate."
}

// wrongName is the advice when the serving certificate does not name the host the API server calls.
func (m installMode) wrongName() string {
	switch m.Cert {
	case certManager:
		return fmt.Sprintf("Add the host to the dnsNames of Certificate %s (the chart and the overlays name the Service in the install's namespace: an install moved to another namespace needs its Certificate rendered for it).", m.InjectFrom)
	case certSelfSigned:
		return "Each replica issues its certificate for the Service named by --webhook-service in --system-namespace: check that they name the Service the webhook configurations call."
	case certSecret:
		return fmt.Sprintf("Issue the certificate of Secret %s for that host.", m.CertSecret)
	}
	return "Issue the manager's serving certificate for that host."
}

// expired is the advice when the serving certificate has expired or is not valid yet.
func (m installMode) expired() string {
	switch m.Cert {
	case certManager:
		return fmt.Sprintf("Check that cert-manager renews Certificate %s (its conditions) and that the replicas serve the renewal (their log, logger serving-certificate).", m.InjectFrom)
	case certSelfSigned:
		return "Each replica renews its own certificate: check the replicas' log (logger serving-certificate) and restart a replica stuck on an old one."
	}
	return "Renew the manager's serving certificate; the replicas' log (logger serving-certificate) says which one they serve."
}

// emptyBundle is the advice when a CA bundle is empty.
func (m installMode) emptyBundle() string {
	switch m.Cert {
	case certManager:
		return fmt.Sprintf("cert-manager's CA injector has not injected the CA of Certificate %s. Check that cert-manager's cainjector is running and that the Certificate is Ready.", m.InjectFrom)
	case certSelfSigned:
		return "the manager injects it once it leads: check that it is running and leads, and its log."
	case certSecret, certDir:
		return "nothing injects it in this mode: set clientConfig.caBundle to the CA that signed the manager's certificate, or install with the certmanager or self-signed overlay."
	}
	return fmt.Sprintf("nothing injects it (no %s annotation): the API server cannot verify the webhook. Install with the certmanager or self-signed overlay, or set clientConfig.caBundle.", injectCAAnnotation)
}
