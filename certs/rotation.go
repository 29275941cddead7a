package certs

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"time"
)

// The keys of the CA Secret of the self-signed mode. tls.crt and tls.key are the CA that signs the
// serving certificates now; ca.crt is every CA the webhook configurations must trust (the signing
// CA, a staged successor and predecessors whose certificates may still be served), the bundle that
// is injected as their caBundle; next.crt and next.key are the staged successor.
const (
	CASecretBundleKey  = CAFile
	CASecretCertKey    = CertFile
	CASecretKeyKey     = KeyFile
	CASecretNextCert   = "next.crt"
	CASecretNextKeyKey = "next.key"
)

// Authority is the content of the CA Secret: the signing CA, its staged successor and the trusted
// bundle.
type Authority struct {
	Signing *CA
	// Next is the successor, trusted before it signs anything; nil when none is staged.
	Next *CA
	// Trusted are the certificates of the bundle, oldest first.
	Trusted []*x509.Certificate
}

// ParseAuthority reads the CA Secret's data. An error means the data is not a usable authority
// (missing or mismatched keys, not a CA); the message names the key, never its content.
func ParseAuthority(data map[string][]byte) (*Authority, error) {
	signing, err := ParseCA(data[CASecretCertKey], data[CASecretKeyKey])
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", CASecretCertKey, CASecretKeyKey, err)
	}
	a := &Authority{Signing: signing}
	if len(data[CASecretNextCert]) > 0 || len(data[CASecretNextKeyKey]) > 0 {
		if a.Next, err = ParseCA(data[CASecretNextCert], data[CASecretNextKeyKey]); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", CASecretNextCert, CASecretNextKeyKey, err)
		}
	}
	if a.Trusted, err = ParseCerts(data[CASecretBundleKey]); err != nil {
		return nil, fmt.Errorf("%s: %w", CASecretBundleKey, err)
	}
	return a, nil
}

// Data is the CA Secret's data for a.
func (a *Authority) Data() (map[string][]byte, error) {
	key, err := EncodeKey(a.Signing.Key)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{CASecretCertKey: a.Signing.PEM, CASecretKeyKey: key, CASecretBundleKey: a.Bundle()}
	if a.Next != nil {
		nextKey, err := EncodeKey(a.Next.Key)
		if err != nil {
			return nil, err
		}
		data[CASecretNextCert], data[CASecretNextKeyKey] = a.Next.PEM, nextKey
	}
	return data, nil
}

// Bundle is the trusted certificates, PEM-encoded, in order: the caBundle to inject.
func (a *Authority) Bundle() []byte {
	var b bytes.Buffer
	for _, c := range a.Trusted {
		b.Write(EncodeCert(c.Raw))
	}
	return b.Bytes()
}

// ParseCA reads a CA certificate and its private key (PEM).
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, errors.New("not a matching PEM certificate and private key")
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, errors.New("the certificate does not parse")
	}
	if !cert.IsCA {
		return nil, errors.New("the certificate is not a CA")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("the private key cannot sign")
	}
	return &CA{Cert: cert, Key: signer, PEM: EncodeCert(cert.Raw)}, nil
}

// ParseCerts reads every CERTIFICATE block of a PEM bundle; other blocks are an error.
func ParseCerts(bundle []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				return nil, errors.New("trailing data that is not PEM")
			}
			return out, nil
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a %s block where certificates belong", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse", len(out)+1)
		}
		out = append(out, c)
	}
}

// CAPolicy decides the CA Secret's next state. A CA of lifetime L is renewed in two steps, so that
// the bundle the API server trusts always holds the CA of every certificate a replica may serve:
//   - with L/2 left, a successor is staged: added to the bundle, signing nothing yet;
//   - with L/3 left (SigningLeft), and once every webhook configuration trusts it, the successor
//     signs (replicas then issue new serving certificates);
//   - a CA leaves the bundle when it expires, since nothing it signed is valid any longer.
type CAPolicy struct {
	CommonName string
	Lifetime   time.Duration
}

// SigningLeft is the least time a CA has left while it signs, when its successor is trusted in
// time: L/3. A serving certificate of a lifetime up to SigningLeft lasts its whole lifetime;
// a longer one would be cut to its CA's expiry (see LeafPolicy), so a leaf lifetime above it is a
// misconfiguration (servingcert.Options.Validate refuses it).
func (p CAPolicy) SigningLeft() time.Duration {
	return p.Lifetime / 3
}

// Plan returns the authority that should be stored, and why, or nil when cur is right as it is.
// cur is nil when there is no usable authority. trusted reports whether every webhook configuration
// already trusts a certificate.
func (p CAPolicy) Plan(now time.Time, cur *Authority, trusted func(*x509.Certificate) bool) (*Authority, string, error) {
	if cur == nil {
		ca, err := NewCA(p.CommonName, p.Lifetime, now)
		if err != nil {
			return nil, "", err
		}
		return &Authority{Signing: ca, Trusted: []*x509.Certificate{ca.Cert}}, "created a CA", nil
	}
	next := &Authority{Signing: cur.Signing, Next: cur.Next}
	var reasons []string
	if next.Next != nil && !next.Next.Cert.NotAfter.After(now) {
		next.Next = nil
		reasons = append(reasons, "dropped an expired staged CA")
	}
	switch left := cur.Signing.Cert.NotAfter.Sub(now); {
	case left <= 0 && next.Next == nil:
		ca, err := NewCA(p.CommonName, p.Lifetime, now)
		if err != nil {
			return nil, "", err
		}
		next.Signing = ca
		reasons = append(reasons, "replaced the expired signing CA")
	case left <= 0 || (left <= p.SigningLeft() && next.Next != nil && trusted(next.Next.Cert)):
		next.Signing, next.Next = next.Next, nil
		reasons = append(reasons, "the staged CA signs from now on")
	case left <= p.Lifetime/2 && next.Next == nil:
		ca, err := NewCA(p.CommonName, p.Lifetime, now)
		if err != nil {
			return nil, "", err
		}
		next.Next = ca
		reasons = append(reasons, "staged the next CA")
	}
	// The bundle: the unexpired CAs of the current one, then the signing and the staged CA.
	seen := map[string]bool{}
	add := func(c *x509.Certificate) {
		if c != nil && c.NotAfter.After(now) && !seen[string(c.Raw)] {
			seen[string(c.Raw)] = true
			next.Trusted = append(next.Trusted, c)
		}
	}
	for _, c := range cur.Trusted {
		add(c)
	}
	add(next.Signing.Cert)
	if next.Next != nil {
		add(next.Next.Cert)
	}
	if len(reasons) == 0 && !sameCerts(next.Trusted, cur.Trusted) {
		reasons = append(reasons, "updated the CA bundle")
	}
	if len(reasons) == 0 {
		return nil, "", nil
	}
	return next, strings.Join(reasons, "; "), nil
}

// Adopt adds to a's bundle the unexpired CA certificates that every one of the injected bundles
// holds. When the CA Secret is lost (deleted, or replaced by something unusable), the new authority
// keeps trusting the CAs the API server trusts now, so the replicas' certificates stay trusted until
// they serve certificates of the new CA; the adopted CAs leave the bundle when they expire.
func (a *Authority) Adopt(now time.Time, injected [][]byte) {
	if len(injected) == 0 {
		return
	}
	count := map[string]int{}
	var order []*x509.Certificate
	for _, b := range injected {
		certs, err := ParseCerts(b)
		if err != nil {
			return // a bundle we cannot read: adopt nothing rather than guess
		}
		seen := map[string]bool{}
		for _, c := range certs {
			if seen[string(c.Raw)] || !c.IsCA || !c.NotAfter.After(now) {
				continue
			}
			seen[string(c.Raw)] = true
			if count[string(c.Raw)] == 0 {
				order = append(order, c)
			}
			count[string(c.Raw)]++
		}
	}
	have := map[string]bool{}
	for _, c := range a.Trusted {
		have[string(c.Raw)] = true
	}
	var adopted []*x509.Certificate
	for _, c := range order {
		if count[string(c.Raw)] == len(injected) && !have[string(c.Raw)] {
			adopted = append(adopted, c)
		}
	}
	a.Trusted = append(adopted, a.Trusted...)
}

// NextCheck is when Plan may next change a: the earliest of the staging, signing and expiry times.
func (p CAPolicy) NextCheck(now time.Time, a *Authority) time.Time {
	times := []time.Time{a.Signing.Cert.NotAfter.Add(-p.Lifetime / 2), a.Signing.Cert.NotAfter.Add(-p.SigningLeft()), a.Signing.Cert.NotAfter}
	if a.Next != nil {
		times = append(times, a.Next.Cert.NotAfter)
	}
	for _, c := range a.Trusted {
		times = append(times, c.NotAfter)
	}
	return earliestAfter(now, times)
}

// LeafPolicy issues a replica's serving certificate and decides when to renew it: when it is not
// signed by the signing CA (the successor took over), names other hosts, is not valid yet (the clock
// went back), or has a third of the policy's lifetime left. A certificate that lasts as long as its
// CA (issued with less than Lifetime left on the CA) is not renewed by time: one issued later by
// the same CA could last no longer; the successor's handover replaces it. So a certificate that
// Issue has just returned never needs renewal.
type LeafPolicy struct {
	Hosts    []string
	Lifetime time.Duration
}

// NeedsRenewal says whether leaf must be replaced, and why.
func (p LeafPolicy) NeedsRenewal(now time.Time, leaf *x509.Certificate, signing *CA) (bool, string) {
	switch {
	case leaf == nil:
		return true, "no serving certificate yet"
	case leaf.CheckSignatureFrom(signing.Cert) != nil:
		return true, "the signing CA changed"
	case !sameHosts(leaf, p.Hosts):
		return true, "the host names changed"
	case now.Before(leaf.NotBefore):
		return true, "the serving certificate is not valid yet"
	}
	if at := p.RenewAt(leaf, signing); !at.IsZero() && !now.Before(at) {
		return true, "the serving certificate is near its expiry"
	}
	return false, ""
}

// RenewAt is when NeedsRenewal turns true by time alone for a leaf of signing: with a third of the
// policy's lifetime left. Zero when time alone never renews it: it expires with signing.
func (p LeafPolicy) RenewAt(leaf *x509.Certificate, signing *CA) time.Time {
	if !leaf.NotAfter.Before(signing.Cert.NotAfter) {
		return time.Time{}
	}
	return leaf.NotAfter.Add(-p.Lifetime / 3)
}

// Issue signs a serving certificate with ca, valid for the policy's lifetime but never past the CA.
// Its expiry is a whole second, as a certificate stores it, rounded up: it has at least the
// lifetime left at now unless its CA's expiry cuts it.
func (p LeafPolicy) Issue(now time.Time, ca *CA) (*tls.Certificate, error) {
	notAfter := now.Add(p.Lifetime).Truncate(time.Second)
	if notAfter.Before(now.Add(p.Lifetime)) {
		notAfter = notAfter.Add(time.Second)
	}
	if ca.Cert.NotAfter.Before(notAfter) {
		notAfter = ca.Cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, errors.New("the signing CA has expired")
	}
	certPEM, keyPEM, err := ca.Issue(Leaf{CommonName: p.Hosts[0], Usage: x509.ExtKeyUsageServerAuth, Hosts: p.Hosts, ValidFor: notAfter.Sub(now), Now: now})
	if err != nil {
		return nil, err
	}
	return KeyPair(certPEM, keyPEM)
}

// KeyPair parses a PEM certificate and key into a tls.Certificate with its Leaf set.
func KeyPair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, errors.New("not a matching PEM certificate and private key")
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, errors.New("the certificate does not parse")
		}
	}
	return &pair, nil
}

// VerifyBundle checks that leaf is valid at now and chains to a certificate of the PEM bundle.
func VerifyBundle(leaf *x509.Certificate, bundle []byte, now time.Time) error {
	roots, err := ParseCerts(bundle)
	if err != nil {
		return err
	}
	if len(roots) == 0 {
		return errors.New("the CA bundle is empty")
	}
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return errors.New("the CA bundle does not trust the certificate")
	}
	return nil
}

// sameHosts reports whether c names exactly hosts, IP addresses compared in their canonical form
// (an IP written as ::FFFF:10.0.0.1 or 2001:DB8::1 is stored as 10.0.0.1 and 2001:db8::1).
func sameHosts(c *x509.Certificate, hosts []string) bool {
	have := map[string]bool{}
	for _, h := range c.DNSNames {
		have[h] = true
	}
	for _, ip := range c.IPAddresses {
		have[ip.String()] = true
	}
	want := map[string]bool{}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			h = ip.String()
		}
		want[h] = true
	}
	return maps.Equal(have, want)
}

func earliestAfter(now time.Time, times []time.Time) time.Time {
	var best time.Time
	for _, t := range times {
		if t.After(now) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	return best
}

func sameCerts(a, b []*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}
