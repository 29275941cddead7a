package main

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// TestManagerIdentity: `run` gives the manager a kubeconfig of its own ServiceAccount, with
// config/rbac's permissions, and not the admin's identity, which its Secret guard would exempt.
func TestManagerIdentity(t *testing.T) {
	cp, err := controlplane.Start(t.Context(), controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	path := filepath.Join(t.TempDir(), "kubeconfig-manager")
	expires, err := managerIdentity(t.Context(), cp, path)
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(expires) < time.Hour {
		t.Errorf("the manager's token expires at %s: too soon for a working session", expires)
	}
	// Applying again (a second `make run` on a kept cluster) is fine.
	if _, err := managerIdentity(t.Context(), cp, path); err != nil {
		t.Fatalf("second time: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Username; got != managerUser {
		t.Errorf("the manager's kubeconfig authenticates as %q, want %q", got, managerUser)
	}
	// What the manager does, with config/rbac's roles (config/rbac/rollout lets it do anything to
	// anything, as a manager that rolls out needs: no permission is refused to it).
	for _, tc := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Group: olmv1.GroupVersion.Group, Resource: "clusterobjectsets", Verb: "watch"}, true},
		{authorizationv1.ResourceAttributes{Namespace: olmv1.DefaultSystemNamespace, Resource: "secrets", Verb: "create"}, true},
		{authorizationv1.ResourceAttributes{Namespace: olmv1.DefaultSystemNamespace, Group: "coordination.k8s.io", Resource: "leases", Verb: "update"}, true},
	} {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(),
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &tc.attrs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != tc.want {
			t.Errorf("the manager may %s %s.%s in %q: %v, want %v", tc.attrs.Verb, tc.attrs.Resource, tc.attrs.Group, tc.attrs.Namespace, r.Status.Allowed, tc.want)
		}
	}
}

// TestServingBundle: the CA of `run --webhooks` is not named as the self-signed mode's, which
// kubectl cos check would take it for.
func TestServingBundle(t *testing.T) {
	b, err := servingBundle([]string{"127.0.0.1", "localhost"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b.CA)
	if block == nil {
		t.Fatal("no PEM CA")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Subject.CommonName != localCACommonName || ca.Subject.CommonName == "cos-externalizer-webhook-ca" {
		t.Errorf("CA subject %q, want %q", ca.Subject.CommonName, localCACommonName)
	}
	block, _ = pem.Decode(b.Cert)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("the serving certificate does not verify for 127.0.0.1 against its CA: %v", err)
	}
}
