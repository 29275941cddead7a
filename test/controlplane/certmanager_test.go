package controlplane_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
)

// TestCertManager starts cert-manager beside a control plane of its own and checks what tests of
// cert-manager integration rely on: a CA chain issued from a self-signed Issuer, a leaf certificate
// for the loopback address, the cainjector filling a webhook configuration's caBundle, renewal the way
// `cmctl renew` triggers it, and a clean stop (by CertManager.Stop and by the control plane's Stop).
func TestCertManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	started := time.Now()
	cm, err := cp.StartCertManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cert-manager working %s after StartCertManager (CRDs installed from %s)", time.Since(started).Round(10*time.Millisecond), cm.CRDDir)

	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "certs"
	if err := controlplane.EnsureNamespace(ctx, cp.Config, ns); err != nil {
		t.Fatal(err)
	}
	create := func(obj map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: obj}
		gvr := controlplane.IssuerGVR
		if u.GetKind() == "Certificate" {
			gvr = controlplane.CertificateGVR
		}
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	issuerRef := func(name string) map[string]any {
		return map[string]any{"name": name, "kind": "Issuer", "group": "cert-manager.io"}
	}
	create(map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
		"metadata": map[string]any{"name": "selfsigned", "namespace": ns},
		"spec":     map[string]any{"selfSigned": map[string]any{}},
	})
	create(map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": "ca", "namespace": ns},
		"spec": map[string]any{
			"isCA": true, "commonName": "test-ca", "secretName": "ca-tls",
			"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256)},
			"issuerRef":  issuerRef("selfsigned"),
		},
	})
	create(map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
		"metadata": map[string]any{"name": "ca", "namespace": ns},
		"spec":     map[string]any{"ca": map[string]any{"secretName": "ca-tls"}},
	})
	create(map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": "leaf", "namespace": ns},
		"spec": map[string]any{
			"secretName":  "leaf-tls",
			"dnsNames":    []any{"leaf.certs.svc", "localhost"},
			"ipAddresses": []any{"127.0.0.1"},
			"usages":      []any{"server auth", "digital signature", "key encipherment"},
			"privateKey":  map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
			"issuerRef":   issuerRef("ca"),
		},
	})
	framework.Eventually(ctx, t, "Certificate leaf to be Ready", func(ctx context.Context) (bool, string) {
		crt, err := dyn.Resource(controlplane.CertificateGVR).Namespace(ns).Get(ctx, "leaf", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return controlplane.ConditionTrue(crt, "Ready"), fmt.Sprintf("conditions %v", crt.Object["status"])
	})

	secret, err := cs.CoreV1().Secrets(ns).Get(ctx, "leaf-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	caPEM := secret.Data["ca.crt"]
	leaf := verifyLeaf(t, secret.Data["tls.crt"], caPEM)

	t.Run("cainjector fills a webhook configuration's caBundle", func(t *testing.T) {
		wc := controlplane.InertWebhookConfiguration("test", ns+"/leaf")
		api := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		if _, err := api.Create(ctx, wc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = api.Delete(context.Background(), wc.Name, metav1.DeleteOptions{}) }()
		framework.Eventually(ctx, t, "caBundle of "+wc.Name+" to be the CA", func(ctx context.Context) (bool, string) {
			got, err := api.Get(ctx, wc.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return bytes.Equal(got.Webhooks[0].ClientConfig.CABundle, caPEM), fmt.Sprintf("caBundle of %d bytes", len(got.Webhooks[0].ClientConfig.CABundle))
		})
	})

	t.Run("renewal triggered like cmctl renew issues a new certificate", func(t *testing.T) {
		if err := controlplane.RenewCertificate(ctx, dyn, ns, "leaf"); err != nil {
			t.Fatal(err)
		}
		var renewed *x509.Certificate
		framework.Eventually(ctx, t, "a renewed certificate in Secret leaf-tls", func(ctx context.Context) (bool, string) {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, "leaf-tls", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			c, err := parseCert(s.Data["tls.crt"])
			if err != nil {
				return false, err.Error()
			}
			if c.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
				return false, "the first certificate, serial " + c.SerialNumber.String()
			}
			renewed = verifyLeaf(t, s.Data["tls.crt"], s.Data["ca.crt"])
			return true, ""
		})
		if bytes.Equal(renewed.RawSubjectPublicKeyInfo, leaf.RawSubjectPublicKeyInfo) {
			t.Error("renewed certificate kept the private key despite rotationPolicy Always")
		}
		framework.Eventually(ctx, t, "Certificate leaf to be Ready and no longer Issuing", func(ctx context.Context) (bool, string) {
			crt, err := dyn.Resource(controlplane.CertificateGVR).Namespace(ns).Get(ctx, "leaf", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			rev, _, _ := unstructured.NestedInt64(crt.Object, "status", "revision")
			return rev == 2 && controlplane.ConditionTrue(crt, "Ready") && !controlplane.ConditionTrue(crt, "Issuing"),
				fmt.Sprintf("status %v", crt.Object["status"])
		})
	})

	t.Run("Stop ends both processes cleanly and a new start works", func(t *testing.T) {
		pids := cm.PIDs()
		if len(pids) != 2 {
			t.Fatalf("PIDs %v, want the controller and the cainjector", pids)
		}
		if err := cm.Stop(); err != nil {
			t.Fatal(err)
		}
		for name, pid := range pids {
			if alive(pid) {
				t.Errorf("%s (pid %d) still running after Stop", name, pid)
			}
		}
		// Their last words: the mains log these only when SIGTERM ended them without an error.
		for name, line := range map[string]string{"cert-manager-controller": "control loops exited", "cert-manager-cainjector": "cainjector stopped"} {
			b, err := os.ReadFile(cp.LogPath(name))
			if err != nil || !strings.Contains(string(b), line) {
				t.Errorf("log of %s does not end with %q (%v)", name, line, err)
			}
		}
		if err := cm.Stop(); err != nil {
			t.Fatalf("second Stop: %v", err)
		}

		cm, err = cp.StartCertManager(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cp.StartCertManager(ctx); err == nil {
			t.Error("a second cert-manager started beside the first")
		}
	})

	t.Run("the control plane's Stop ends cert-manager too", func(t *testing.T) {
		pids := cm.PIDs()
		if err := cp.Stop(); err != nil {
			t.Fatal(err)
		}
		for name, pid := range pids {
			if alive(pid) {
				t.Errorf("%s (pid %d) still running after the control plane's Stop", name, pid)
			}
		}
		if err := cm.Stop(); err != nil {
			t.Fatalf("CertManager.Stop after the control plane's: %v", err)
		}
	})
}

// verifyLeaf parses a PEM certificate, checks that it chains to caPEM for server auth on 127.0.0.1
// and has that IP SAN, and returns it.
func verifyLeaf(t *testing.T, certPEM, caPEM []byte) *x509.Certificate {
	t.Helper()
	leaf, err := parseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no CA certificate in ca.crt: %q", caPEM)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("tls.crt does not verify against ca.crt: %v", err)
	}
	found := false
	for _, ip := range leaf.IPAddresses {
		found = found || ip.Equal(net.IPv4(127, 0, 0, 1))
	}
	if !found {
		t.Fatalf("IP SANs %v, want 127.0.0.1", leaf.IPAddresses)
	}
	return leaf
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}
