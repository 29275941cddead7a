package certs

// Where the webhook serving certificate comes from (--webhook-cert-source): the manager chooses its
// source by them, and kubectl cos check reads them from the manager's flags.
const (
	SourceDir        = "dir"
	SourceSecret     = "secret"
	SourceSelfSigned = "self-signed"
)

// The Secrets of the serving certificate, as config/ installs them: cert-manager's certificate
// (--webhook-cert-source=secret) and the self-signed mode's CA.
const (
	DefaultCertSecret = "cos-externalizer-webhook-cert"
	DefaultCASecret   = "cos-externalizer-webhook-ca"
)
