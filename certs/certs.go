// Package certs makes certificates when cert-manager does not: a private CA and the certificates it
// signs. The webhook's serving certificate is written as tls.crt, tls.key and ca.crt (the files
// controller-runtime's webhook server and cert-manager's Secrets use); the local control plane uses the
// same CA and issuing code for its own PKI.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names inside a certificate directory.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

// CA is a certificate authority: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
}

// NewCA makes a self-signed CA valid from an hour before now for validFor.
func NewCA(commonName string, validFor time.Duration, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: EncodeCert(der)}, nil
}

// Leaf describes a certificate to issue.
type Leaf struct {
	CommonName    string
	Organizations []string
	// Usage is x509.ExtKeyUsageServerAuth or x509.ExtKeyUsageClientAuth.
	Usage x509.ExtKeyUsage
	// Hosts are IP addresses or DNS names (subject alternative names).
	Hosts    []string
	ValidFor time.Duration
	Now      time.Time
}

// Issue signs a new ECDSA P-256 key's certificate for leaf and returns both, PEM-encoded.
func (ca *CA) Issue(leaf Leaf) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: leaf.CommonName, Organization: leaf.Organizations},
		NotBefore:    leaf.Now.Add(-time.Hour),
		NotAfter:     leaf.Now.Add(leaf.ValidFor),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{leaf.Usage},
	}
	for _, h := range leaf.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = EncodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return EncodeCert(der), keyPEM, nil
}

// EncodeCert PEM-encodes a DER certificate.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// EncodeKey PEM-encodes a private key as PKCS #8.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// Bundle is a generated CA and serving certificate, PEM-encoded.
type Bundle struct {
	CA, Cert, Key []byte
}

// Generate makes a CA and a serving certificate valid for hosts (IP addresses or DNS names) for the
// given duration.
func Generate(hosts []string, validFor time.Duration, now time.Time) (*Bundle, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("no host names for the serving certificate")
	}
	ca, err := NewCA("cos-externalizer-webhook-ca", validFor, now)
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.Issue(Leaf{CommonName: hosts[0], Usage: x509.ExtKeyUsageServerAuth, Hosts: hosts, ValidFor: validFor, Now: now})
	if err != nil {
		return nil, err
	}
	return &Bundle{CA: ca.PEM, Cert: cert, Key: key}, nil
}

// Write stores the bundle in dir as tls.crt, tls.key and ca.crt.
func (b *Bundle) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range map[string][]byte{CertFile: b.Cert, KeyFile: b.Key, CAFile: b.CA} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
