package certs

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"
)

func TestGenerate(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		hosts      []string
		verifyName string
		wantErr    bool
	}{
		"loopback IP":         {hosts: []string{"127.0.0.1"}, verifyName: "127.0.0.1"},
		"service DNS name":    {hosts: []string{"webhook.olmv1-system.svc", "127.0.0.1"}, verifyName: "webhook.olmv1-system.svc"},
		"no hosts is refused": {wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := Generate(tc.hosts, 24*time.Hour, now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			dir := t.TempDir()
			if err := b.Write(dir); err != nil {
				t.Fatal(err)
			}
			pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := x509.ParseCertificate(pair.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(b.CA) {
				t.Fatal("CA does not parse")
			}
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: tc.verifyName, Roots: pool, CurrentTime: now}); err != nil {
				t.Errorf("serving certificate does not verify for %s: %v", tc.verifyName, err)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: tc.verifyName, Roots: pool, CurrentTime: now.Add(48 * time.Hour)}); err == nil {
				t.Error("certificate still valid after its lifetime")
			}
		})
	}
}
