package servingcert

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// TestNewSource checks that each --webhook-cert-source gets its own CertificateSource, and that
// the dir source leaves the TLS config and the readiness to controller-runtime.
func TestNewSource(t *testing.T) {
	tests := map[string]struct {
		source string
		want   string // the source's type; empty: none
	}{
		certs.SourceDir:        {source: certs.SourceDir},
		certs.SourceSecret:     {source: certs.SourceSecret, want: "*servingcert.SecretSource"},
		certs.SourceSelfSigned: {source: certs.SourceSelfSigned, want: "*servingcert.SelfSignedSource"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := New(Options{Source: tc.source, Namespace: "olmv1-system", SecretName: certs.DefaultCertSecret}, NewMetrics())
			got := ""
			if s.src != nil {
				got = fmt.Sprintf("%T", s.src)
			}
			if got != tc.want {
				t.Fatalf("source %s, want %s", got, tc.want)
			}
			var cfg tls.Config
			s.TLSOption()(&cfg)
			if (cfg.GetCertificate != nil) != (tc.want != "") {
				t.Errorf("GetCertificate set: %t, want %t", cfg.GetCertificate != nil, tc.want != "")
			}
			_, authority := s.src.(interface{ Authority() manager.Runnable })
			if authority != (tc.source == certs.SourceSelfSigned) {
				t.Errorf("has a leader's authority: %t", authority)
			}
			err := s.ReadyCheck(nil)
			if (err == nil) != (tc.want == "") {
				t.Errorf("ready before any sync: %v", err)
			}
		})
	}
}

// TestSecretSourceSync syncs a SecretSource after each change of its Secret: none yet, a key pair, a
// renewed one, and ones that are not key pairs, which leave the served certificate as it was. With no
// webhook configuration to trust them, certificates are served at once.
func TestSecretSourceSync(t *testing.T) {
	ca := newTestCA(t, "ca")
	certPEM, keyPEM, pair := issue(t, ca)
	renewedPEM, renewedKeyPEM, renewed := issue(t, ca)
	type step struct {
		data map[string][]byte // nil: no Secret
		// wantErr is part of the sync's error; wantServed, the certificate served then (nil: none).
		wantErr    string
		wantServed *tls.Certificate
	}
	tests := map[string][]step{
		"no Secret yet, then one": {
			{},
			{data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}, wantServed: pair},
		},
		"a renewal": {
			{data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}, wantServed: pair},
			{data: map[string][]byte{corev1.TLSCertKey: renewedPEM, corev1.TLSPrivateKeyKey: renewedKeyPEM}, wantServed: renewed},
		},
		"not a key pair, then one": {
			{data: map[string][]byte{corev1.TLSCertKey: []byte("not PEM"), corev1.TLSPrivateKeyKey: keyPEM}, wantErr: "the Secret olmv1-system/cert: tls.crt/tls.key"},
			{data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}, wantServed: pair},
		},
		"a key of another certificate keeps the served one": {
			{data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}, wantServed: pair},
			{data: map[string][]byte{corev1.TLSCertKey: renewedPEM, corev1.TLSPrivateKeyKey: keyPEM}, wantErr: "the Secret olmv1-system/cert", wantServed: pair},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			api := newAPIServer()
			s := New(Options{Source: certs.SourceSecret, Namespace: "olmv1-system", SecretName: "cert", Clock: testingclock.NewFakeClock(t0)}, NewMetrics())
			*s.env = env{log: logr.Discard(), cached: api, api: api, cl: api, rec: &events.FakeRecorder{}}
			src := s.src.(*SecretSource)
			for i, st := range steps {
				if st.data != nil {
					sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "olmv1-system", Name: "cert"}}
					if err := api.Get(ctx, client.ObjectKeyFromObject(sec), sec); err != nil {
						sec.Data = st.data
						if err := api.Create(ctx, sec); err != nil {
							t.Fatal(err)
						}
					} else {
						sec.Data = st.data
						if err := api.Update(ctx, sec); err != nil {
							t.Fatal(err)
						}
					}
				}
				next, err := src.sync(ctx)
				if st.wantErr == "" && err != nil {
					t.Fatalf("step %d: unexpected error: %v", i, err)
				}
				if st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr)) {
					t.Fatalf("step %d: error %v, want one containing %q", i, err, st.wantErr)
				}
				if err != nil && strings.Contains(err.Error(), "BEGIN") {
					t.Errorf("step %d: the error holds the Secret's content: %v", i, err)
				}
				if !next.IsZero() {
					t.Errorf("step %d: asks for a sync at %s; a Secret source waits for changes", i, next)
				}
				cur, _ := src.GetCertificate(nil)
				switch {
				case st.wantServed == nil && cur != nil:
					t.Errorf("step %d: serves serial %s, want nothing", i, cur.Leaf.SerialNumber)
				case st.wantServed != nil && (cur == nil || !cur.Leaf.Equal(st.wantServed.Leaf)):
					t.Errorf("step %d: serves %v, want serial %s", i, cur, st.wantServed.Leaf.SerialNumber)
				}
				if healthy := src.Healthy() == nil; healthy != (st.wantServed != nil) {
					t.Errorf("step %d: healthy %t, want %t", i, healthy, st.wantServed != nil)
				}
			}
		})
	}
}
