package e2e

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/certs/servingcert"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// Names config/ installs.
const (
	CertificateName = "cos-externalizer-serving-cert"
	// CACertificateName is cert-manager's CA Certificate, whose Secret has the same name.
	CACertificateName = "cos-externalizer-ca"
	LeaseName         = "cos-externalizer.olm.operatorframework.io"
	loadClients       = 10
)

// Order is the order the cases run in.
var Order = []string{"CertManagerTLS", "CertManagerRenewalUnderLoad", "CertManagerCARenewalUnderLoad", "SelfSignedRotationUnderLoad", "LeaderKilledMidRollout", "ReplicaStopped", "ModeSwitchedUnderLoad"}

// Cases are the suite, by name; each deploys what it needs.
var Cases = map[string]func(*testing.T, Cluster){
	"CertManagerTLS":                CertManagerTLS,
	"CertManagerRenewalUnderLoad":   CertManagerRenewalUnderLoad,
	"CertManagerCARenewalUnderLoad": CertManagerCARenewalUnderLoad,
	"SelfSignedRotationUnderLoad":   SelfSignedRotationUnderLoad,
	"LeaderKilledMidRollout":        LeaderKilledMidRollout,
	"ReplicaStopped":                ReplicaStopped,
	"ModeSwitchedUnderLoad":         ModeSwitchedUnderLoad,
}

func newClient(t testing.TB, c Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.Config(), client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// replicas is how many manager replicas every case runs, behind the load balancer.
const replicas = 2

// deploy installs the manager's replicas in mode, with extra flags.
func deploy(t *testing.T, c Cluster, mode string, extra ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if err := c.Deploy(ctx, mode, replicas, extra...); err != nil {
		t.Fatalf("deploying %d replicas (%s): %v", replicas, mode, err)
	}
	c.Logf("deployed %d replicas (%s) in %s", replicas, mode, time.Since(start).Round(time.Millisecond))
}

// EnsureNamespace creates the namespace unless it exists.
func EnsureNamespace(t testing.TB, cfg *rest.Config, name string) {
	t.Helper()
	cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	framework.EnsureNamespace(context.Background(), t, cl, name)
}

func stopLoad(t testing.TB, l *Load, what string) Result {
	t.Helper()
	r := l.Stop()
	if len(r.Failed) > 0 {
		for i, err := range r.Failed[:min(len(r.Failed), 5)] {
			t.Errorf("%s: failed request %d of %d: %v", what, i+1, len(r.Failed), err)
		}
	}
	return r
}

func noRestarts(t testing.TB, c Cluster) {
	t.Helper()
	n, err := c.Restarts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d replica restarts, want 0", n)
	}
}

// CertManagerTLS: a ClusterObjectSet applied through the webhooks, served with cert-manager's
// certificate, is externalized and rolls out.
func CertManagerTLS(t *testing.T, c Cluster) {
	deploy(t, c, ModeCertManager)
	ctx := context.Background()
	cl := newClient(t, c)
	framework.EnsureNamespace(context.Background(), t, cl, "e2e-tls")
	cos := builders.COS("e2e-tls", builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		builders.WithPhase("config", builders.Inline(builders.ConfigMap("e2e-tls", "tls", map[string]string{"k": "v"}))))
	start := time.Now()
	if err := cl.Create(ctx, cos); err != nil {
		t.Fatalf("creating through the webhooks: %v", err)
	}
	c.Logf("admission of a ClusterObjectSet through cert-manager's certificate: %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { _ = cl.Delete(context.Background(), cos) })
	if ref := cos.Spec.Phases[0].Objects[0].Ref; ref.Name == "" {
		t.Fatalf("the stored ClusterObjectSet holds no ref: the mutating webhook did not externalize it")
	}
	framework.Eventually(context.Background(), t, "the ClusterObjectSet to succeed", func(ctx context.Context) (bool, string) {
		got := &olmv1.ClusterObjectSet{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(cos), got); err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, olmv1.ConditionSucceeded), fmt.Sprint(got.Status.Conditions)
	})
	// Every replica serves a certificate that the injected CA bundle trusts.
	bundle := injectedBundle(t, cl)
	for i := range c.Replicas() {
		cert, err := c.Served(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if err := certs.VerifyBundle(cert, bundle, time.Now()); err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}

// CertManagerRenewalUnderLoad: the Certificate renewed (as `cmctl renew` does) while 10 clients
// send admission requests: every replica serves the new certificate; no request fails and no
// replica restarts.
func CertManagerRenewalUnderLoad(t *testing.T, c Cluster) {
	deploy(t, c, ModeCertManager)
	ctx := context.Background()
	cl := newClient(t, c)
	framework.EnsureNamespace(context.Background(), t, cl, "e2e-load")
	before := servedSerials(t, c)
	load, err := StartLoad(c.Config(), loadClients)
	if err != nil {
		t.Fatal(err)
	}
	if err := load.WaitFor(ctx, 50); err != nil {
		t.Fatal(err)
	}
	issued, served := RenewAndWait(t, c)
	if err := load.WaitFor(ctx, 50); err != nil {
		t.Fatal(err)
	}
	r := stopLoad(t, load, "renewal")
	noRestarts(t, c)
	for i, s := range servedSerials(t, c) {
		if s == before[i] {
			t.Errorf("replica %d still serves serial %s", i, s)
		}
	}
	c.Logf("renewal under load: issued %s and served by every replica %s after the trigger; %s",
		issued.Round(time.Millisecond), served.Round(time.Millisecond), r)
}

// RenewAndWait renews the serving Certificate as `cmctl renew` does and waits until every replica
// serves the new certificate; it returns the times from the trigger until cert-manager wrote it and
// until the last replica served it.
func RenewAndWait(t testing.TB, c Cluster) (issued, served time.Duration) {
	t.Helper()
	cl := newClient(t, c)
	secretSerial := func(ctx context.Context) string {
		cert, err := secretCert(ctx, cl, types.NamespacedName{Namespace: c.Namespace(), Name: certs.DefaultCertSecret})
		if err != nil {
			return ""
		}
		return cert.SerialNumber.String()
	}
	old := secretSerial(context.Background())
	triggered := time.Now()
	dyn, err := dynamic.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	if err := controlplane.RenewCertificate(context.Background(), dyn, c.Namespace(), CertificateName); err != nil {
		t.Fatalf("triggering the renewal of Certificate %s: %v", CertificateName, err)
	}
	var renewed string
	framework.Eventually(context.Background(), t, "cert-manager to write the renewed certificate", func(ctx context.Context) (bool, string) {
		renewed = secretSerial(ctx)
		return renewed != "" && renewed != old, "serial " + renewed
	})
	issued = time.Since(triggered)
	framework.Eventually(context.Background(), t, "every replica to serve the renewed certificate", func(ctx context.Context) (bool, string) {
		for i := range c.Replicas() {
			cert, err := c.Served(ctx, i)
			if err != nil || cert.SerialNumber.String() != renewed {
				return false, fmt.Sprintf("replica %d: %v", i, err)
			}
		}
		return true, ""
	})
	return issued, time.Since(triggered)
}

// CertManagerCARenewalUnderLoad: cert-manager's CA renewed (as `cmctl renew` does) and then the
// serving Certificate, and again with the CA Secret deleted instead, while 10 clients send admission
// requests: every replica ends on a certificate of the newest CA, the injected bundle still holds
// the CAs before it, and no request fails.
func CertManagerCARenewalUnderLoad(t *testing.T, c Cluster) {
	deploy(t, c, ModeCertManager)
	ctx := context.Background()
	cl := newClient(t, c)
	framework.EnsureNamespace(context.Background(), t, cl, "e2e-load")
	dyn, err := dynamic.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	caKey := types.NamespacedName{Namespace: c.Namespace(), Name: CACertificateName}
	ca := func(ctx context.Context) (*x509.Certificate, error) { return secretCert(ctx, cl, caKey) }
	first, err := ca(ctx)
	if err != nil {
		t.Fatalf("cert-manager's CA Secret after deploying: %v", err)
	}
	cas := []*x509.Certificate{first}
	load, err := StartLoad(c.Config(), loadClients)
	if err != nil {
		t.Fatal(err)
	}
	// newCA waits for cert-manager to write a CA other than the last, then renews the serving
	// Certificate and waits until every replica serves a certificate of the new CA.
	newCA := func(how string) (served time.Duration) {
		t.Helper()
		last := cas[len(cas)-1]
		var cur *x509.Certificate
		framework.Eventually(context.Background(), t, "cert-manager to write a new CA ("+how+")", func(ctx context.Context) (bool, string) {
			var err error
			if cur, err = ca(ctx); err != nil {
				return false, err.Error()
			}
			return !cur.Equal(last), "the old CA"
		})
		cas = append(cas, cur)
		// Requests while only the CA has changed.
		if err := load.WaitFor(ctx, 50); err != nil {
			t.Fatal(err)
		}
		_, served = RenewAndWait(t, c)
		for i := range c.Replicas() {
			if cert, err := c.Served(ctx, i); err != nil || cert.CheckSignatureFrom(cur) != nil {
				t.Fatalf("replica %d serves a certificate not signed by the new CA (%v)", i, err)
			}
		}
		return served
	}
	if err := load.WaitFor(ctx, 50); err != nil {
		t.Fatal(err)
	}
	if err := controlplane.RenewCertificate(ctx, dyn, c.Namespace(), CACertificateName); err != nil {
		t.Fatalf("triggering the renewal of Certificate %s: %v", CACertificateName, err)
	}
	renewed := newCA("renewed")
	if err := load.WaitFor(ctx, 50); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: caKey.Namespace, Name: caKey.Name}}); err != nil {
		t.Fatal(err)
	}
	recreated := newCA("the CA Secret deleted")
	if err := load.WaitFor(ctx, 50); err != nil {
		t.Fatal(err)
	}
	r := stopLoad(t, load, "CA renewal")
	noRestarts(t, c)
	// The overlap: the CAs before the newest stay trusted (until the replicas have served the
	// newest one's certificate for a while), so a replica that switches late still answers.
	bundle, err := certs.ParseCerts(injectedBundle(t, cl))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range cas {
		if !slices.ContainsFunc(bundle, want.Equal) {
			t.Errorf("the injected bundle of %d certificates lacks CA %d of %d (serial %s)", len(bundle), i+1, len(cas), want.SerialNumber)
		}
	}
	c.Logf("cert-manager CA renewed, then the CA Secret deleted: each time every replica served a certificate of the new CA %s and %s after the serving renewal's trigger; injected bundle: %d CAs; %s",
		renewed.Round(time.Millisecond), recreated.Round(time.Millisecond), len(bundle), r)
}

// SelfSignedRotationUnderLoad: without cert-manager the leader creates the CA and injects it, and
// with lifetimes of seconds the serving certificates and the CA rotate while 10 clients send
// admission requests; then an admin deletes the CA Secret. No request fails.
func SelfSignedRotationUnderLoad(t *testing.T, c Cluster) {
	const caLife, certLife = 24 * time.Second, 6 * time.Second
	deploy(t, c, ModeSelfSigned, "--self-signed-ca-lifetime="+caLife.String(), "--self-signed-cert-lifetime="+certLife.String())
	ctx := context.Background()
	cl := newClient(t, c)
	framework.EnsureNamespace(context.Background(), t, cl, "e2e-load")
	caKey := types.NamespacedName{Namespace: c.Namespace(), Name: certs.DefaultCASecret}
	signing := func(ctx context.Context) (*x509.Certificate, error) { return secretCert(ctx, cl, caKey) }
	first, err := signing(ctx)
	if err != nil {
		t.Fatalf("the CA Secret after deploying: %v", err)
	}
	bundle := injectedBundle(t, cl)
	if err := certs.VerifyBundle(first, bundle, time.Now()); err != nil {
		t.Fatalf("the CA is not injected: %v", err)
	}
	load, err := StartLoad(c.Config(), loadClients)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	leafChanges := map[string]bool{}
	// Two CA rotations: each replica serves a certificate of the second successor.
	rotations := 0
	last := first
	framework.Eventually(framework.Within(t, 4*caLife), t, "the CA to rotate twice and every replica to serve a certificate of the new CA", func(ctx context.Context) (bool, string) {
		for i := range c.Replicas() {
			if cert, err := c.Served(ctx, i); err == nil {
				leafChanges[cert.SerialNumber.String()] = true
			}
		}
		cur, err := signing(ctx)
		if err != nil {
			return false, err.Error()
		}
		if !cur.Equal(last) {
			rotations++
			last = cur
		}
		if rotations < 2 {
			return false, fmt.Sprintf("%d rotations", rotations)
		}
		return onCA(ctx, c, cur)
	})
	took := time.Since(start)
	// An admin deletes the CA Secret: the leader makes a new CA, keeps trusting the injected one
	// until the replicas serve certificates of the new CA, and no request fails.
	if err := cl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: caKey.Namespace, Name: caKey.Name}}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	framework.Eventually(framework.Within(t, 2*caLife), t, "a new CA after the CA Secret was deleted, and every replica on it", func(ctx context.Context) (bool, string) {
		cur, err := signing(ctx)
		if err != nil {
			return false, err.Error()
		}
		if cur.Equal(last) {
			return false, "the old CA"
		}
		return onCA(ctx, c, cur)
	})
	recreated := time.Since(deleted)
	if err := load.WaitFor(ctx, 50); err != nil {
		t.Fatal(err)
	}
	r := stopLoad(t, load, "self-signed rotation")
	noRestarts(t, c)
	c.Logf("self-signed, CA lifetime %s, certificate lifetime %s: 2 CA rotations and %d serving certificates in %s; CA Secret deleted: every replica on a new CA %s later; %s",
		caLife, certLife, len(leafChanges), took.Round(time.Millisecond), recreated.Round(time.Millisecond), r)
}

// onCA reports whether every replica serves a certificate of ca, or the first that does not.
func onCA(ctx context.Context, c Cluster, ca *x509.Certificate) (bool, string) {
	for i := range c.Replicas() {
		cert, err := c.Served(ctx, i)
		if err != nil || cert.CheckSignatureFrom(ca) != nil {
			return false, fmt.Sprintf("replica %d not yet on the new CA (%v)", i, err)
		}
	}
	return true, ""
}

// LeaderKilledMidRollout: the leader is killed while the Argo CD bundle rolls out (a gate in one of
// its phases holds the rollout there); the other replica takes the Lease only after the leader is
// gone and finishes the rollout. The Lease is shorter than the default (--leader-elect-* flags), so
// the takeover comes sooner.
func LeaderKilledMidRollout(t *testing.T, c Cluster) {
	deploy(t, c, ModeCertManager, "--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s")
	ctx := context.Background()
	cl := newClient(t, c)
	framework.EnsureNamespace(context.Background(), t, cl, "argocd")
	gate := builders.ConfigMap("argocd", "e2e-gate", map[string]string{"k": "v"})
	gate.SetLabels(map[string]string{"e2e.cos-externalizer.io/gate": "true"})
	cos, err := builders.Bundle("e2e-argocd", "argocd-install", "argocd", builders.WithProbes(olmv1.ProgressionProbe{
		Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchLabels: map[string]string{"e2e.cos-externalizer.io/gate": "true"}}},
		Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: "data.open", Value: "yes"}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	gated := -1
	for i, p := range cos.Spec.Phases {
		for _, o := range p.Objects {
			if i > 0 && gated < 0 && o.Object.GetKind() == "ConfigMap" {
				gated = i
			}
		}
	}
	if gated < 0 {
		t.Fatal("no phase after the first holds a ConfigMap")
	}
	RunEverywhere(c, cos)
	cos.Spec.Phases[gated].Objects = append(cos.Spec.Phases[gated].Objects, builders.Inline(gate))
	// A run before this one (go test -count=N) deleted its set at its end without waiting for the
	// teardown: wait it out, so that this run's gate starts closed. One GET when there is none.
	framework.Eventually(context.Background(), t, "the set of an earlier run to be torn down", func(ctx context.Context) (bool, string) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(cos), &olmv1.ClusterObjectSet{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := cl.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), cos) })
	framework.Eventually(context.Background(), t, fmt.Sprintf("the rollout to reach the gate in phase %q", cos.Spec.Phases[gated].Name), func(ctx context.Context) (bool, string) {
		got := &olmv1.ClusterObjectSet{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(cos), got); err != nil {
			return false, err.Error()
		}
		complete := 0
		for _, p := range got.Status.ObservedPhases {
			if !p.CompletedAt.IsZero() {
				complete++
			}
		}
		cm := &corev1.ConfigMap{}
		err := cl.Get(ctx, client.ObjectKey{Namespace: "argocd", Name: "e2e-gate"}, cm)
		return complete == gated && err == nil, fmt.Sprintf("%d of %d phases complete, gate: %v; conditions %v", complete, len(got.Spec.Phases), err, got.Status.Conditions)
	})
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := &coordinationv1.Lease{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: c.Namespace(), Name: LeaseName}, before); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := c.Kill(ctx, leader); err != nil {
		t.Fatal(err)
	}
	// Open the gate (a field the ClusterObjectSet does not set, so no drift to restore).
	patch := []byte(`{"data":{"open":"yes"}}`)
	if err := cl.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "e2e-gate"}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(context.Background(), t, "the other replica to finish the rollout", func(ctx context.Context) (bool, string) {
		got := &olmv1.ClusterObjectSet{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(cos), got); err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, olmv1.ConditionSucceeded), fmt.Sprint(got.Status.Conditions)
	})
	finished := time.Since(killed)
	after := &coordinationv1.Lease{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: c.Namespace(), Name: LeaseName}, after); err != nil {
		t.Fatal(err)
	}
	// One leader at a time: the Lease changed hands once, after the kill.
	if ptr.Deref(after.Spec.HolderIdentity, "") == ptr.Deref(before.Spec.HolderIdentity, "") {
		t.Errorf("the Lease is still held by %s", ptr.Deref(after.Spec.HolderIdentity, ""))
	}
	if got, want := ptr.Deref(after.Spec.LeaseTransitions, 0), ptr.Deref(before.Spec.LeaseTransitions, 0)+1; got != want {
		t.Errorf("leaseTransitions %d, want %d", got, want)
	}
	if after.Spec.AcquireTime == nil || after.Spec.AcquireTime.Time.Before(killed.Add(-time.Second)) {
		t.Errorf("the new leader acquired the Lease at %v, before the old one was killed at %s", after.Spec.AcquireTime, killed)
	}
	// The holder changed (above); a replica index may name another process after a kill (on kind,
	// the Deployment's replacement Pod sorts where the killed one did), so only a leader is asked for.
	if _, err := c.Leader(ctx); err != nil {
		t.Errorf("no leader after the kill: %v", err)
	}
	c.Logf("leader killed mid-rollout: Lease taken over %s after the kill, rollout finished %s after it",
		after.Spec.AcquireTime.Sub(killed).Round(time.Millisecond), finished.Round(time.Millisecond))
}

// ModeSwitchedUnderLoad: an install is switched from cert-manager to self-signed as a rolling update
// does it (the new overlay applied over the running replicas) while 10 clients send admission
// requests. The new replicas get a CA although the leader is an old replica, which runs no self-signed
// authority (they used to wait for it forever), every replica ends serving a certificate of that CA,
// and no request fails: a stopping replica finishes its requests, and drains its keep-alive
// connections before closing them (--shutdown-drain-period).
func ModeSwitchedUnderLoad(t *testing.T, c Cluster) {
	deploy(t, c, ModeCertManager)
	ctx := context.Background()
	cl := newClient(t, c)
	framework.EnsureNamespace(ctx, t, cl, "e2e-load")
	// As on an install that never ran self-signed: no CA Secret of an earlier case.
	if err := ResetCA(ctx, cl, c.Namespace(), ModeSelfSigned); err != nil {
		t.Fatal(err)
	}
	load, err := StartLoad(c.Config(), loadClients)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Switch(ctx, ModeSelfSigned); err != nil {
		stopLoad(t, load, "mode switch")
		t.Fatalf("switching to self-signed: %v", err)
	}
	switched := time.Since(start)
	caKey := types.NamespacedName{Namespace: c.Namespace(), Name: certs.DefaultCASecret}
	framework.Eventually(framework.Within(t, 2*time.Minute), t, "every replica to serve a certificate of the self-signed CA", func(ctx context.Context) (bool, string) {
		ca, err := secretCert(ctx, cl, caKey)
		if err != nil {
			return false, err.Error()
		}
		for i := range c.Replicas() {
			cert, err := c.Served(ctx, i)
			if err != nil {
				return false, fmt.Sprintf("replica %d: %v", i, err)
			}
			if err := cert.CheckSignatureFrom(ca); err != nil {
				return false, fmt.Sprintf("replica %d serves a certificate of %s", i, cert.Issuer)
			}
		}
		return true, ""
	})
	r := stopLoad(t, load, "mode switch")
	noRestarts(t, c)
	c.Logf("switched from cert-manager to self-signed under load in %s; %s", switched.Round(time.Millisecond), r)
}

// ReplicaStopped: with one of two replicas stopped, the webhooks still answer every request.
func ReplicaStopped(t *testing.T, c Cluster) {
	deploy(t, c, ModeCertManager)
	ctx := context.Background()
	framework.EnsureNamespace(context.Background(), t, newClient(t, c), "e2e-load")
	two := MeasureAdmission(t, c, 300)
	if err := c.Stop(ctx, 1); err != nil {
		t.Fatal(err)
	}
	one := MeasureAdmission(t, c, 300)
	c.Logf("admission with 2 replicas: %s; with 1: %s; p99 ratio %.2f", two, one, float64(one.P99)/float64(two.P99))
}

// MeasureAdmission sends n requests from 10 clients and returns what they saw; failures fail t.
func MeasureAdmission(t testing.TB, c Cluster, n int) Result {
	t.Helper()
	load, err := StartLoad(c.Config(), loadClients)
	if err != nil {
		t.Fatal(err)
	}
	if err := load.WaitFor(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	r := load.Stop()
	for _, err := range r.Failed[:min(len(r.Failed), 5)] {
		t.Errorf("admission request failed: %v", err)
	}
	return r
}

func servedSerials(t testing.TB, c Cluster) []string {
	t.Helper()
	var out []string
	for i := range c.Replicas() {
		cert, err := c.Served(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cert.SerialNumber.String())
	}
	return out
}

// injectedBundle is the caBundle of the first mutating webhook (every webhook gets the same).
func injectedBundle(t testing.TB, cl client.Client) []byte {
	t.Helper()
	mwc := &unstructured.Unstructured{}
	mwc.SetAPIVersion("admissionregistration.k8s.io/v1")
	mwc.SetKind("MutatingWebhookConfiguration")
	if err := cl.Get(context.Background(), types.NamespacedName{Name: servingcert.DefaultWebhookConfiguration}, mwc); err != nil {
		t.Fatal(err)
	}
	hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	if len(hooks) == 0 {
		t.Fatal("no webhooks")
	}
	b64, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle")
	pemBytes, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return pemBytes
}

// secretCert reads the certificate of the Secret key (parseCert of its tls.crt).
func secretCert(ctx context.Context, cl client.Client, key types.NamespacedName) (*x509.Certificate, error) {
	s := &corev1.Secret{}
	if err := cl.Get(ctx, key, s); err != nil {
		return nil, err
	}
	return parseCert(s.Data[corev1.TLSCertKey])
}

// parseCert reads the first certificate of a PEM bundle.
func parseCert(pemBytes []byte) (*x509.Certificate, error) {
	cs, err := certs.ParseCerts(pemBytes)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return cs[0], nil
}
