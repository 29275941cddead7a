package servingcert

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// SecretSource serves the certificate of a Secret (tls.crt, tls.key) that something else keeps
// current, cert-manager's Certificate: read through a watch, so a renewal is served within a second.
type SecretSource struct {
	*served
	secret types.NamespacedName
}

var _ CertificateSource = &SecretSource{}

// newSecretSource returns the source of the Secret secret, switched to once webhookConfiguration
// trusts it (empty: at once).
func newSecretSource(e *env, m *Metrics, clk clock.Clock, secret types.NamespacedName, webhookConfiguration string) *SecretSource {
	return &SecretSource{served: newServed(certs.SourceSecret, e, m, clk, webhookConfiguration), secret: secret}
}

// Start keeps the served certificate the Secret's until ctx ends.
func (s *SecretSource) Start(ctx context.Context) error {
	return s.run(ctx, s.sync)
}

// sync offers the Secret's certificate.
func (s *SecretSource) sync(ctx context.Context) (time.Time, error) {
	s.refresh(ctx)
	sec, err := s.env.cachedSecret(ctx, s.secret)
	if err != nil {
		return time.Time{}, err
	}
	if sec == nil {
		s.env.log.Info("waiting for the Secret of the serving certificate", "secret", s.secret.String())
		return time.Time{}, nil
	}
	pair, err := certs.KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return time.Time{}, fmt.Errorf("the Secret %s: %s/%s: %w", s.secret, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
	}
	return s.offer(ctx, pair, "the Secret holds a new certificate"), nil
}
