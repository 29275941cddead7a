package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

const (
	// CertManagerNamespace is the namespace StartCertManager creates and gives cert-manager as its
	// cluster resource namespace: the Secrets that ClusterIssuers read (a CA ClusterIssuer's key pair)
	// live there.
	CertManagerNamespace = "cert-manager"

	certManagerController = "cert-manager-controller"
	certManagerCAInjector = "cert-manager-cainjector"
	// certManagerStartTimeout bounds StartCertManager, CRDs included; it is usually ready in 1-2 s.
	certManagerStartTimeout = 2 * time.Minute
)

// The cert-manager resources tests use, for the dynamic client (this module does not depend on
// cert-manager's Go API).
var (
	CertificateGVR   = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	IssuerGVR        = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	ClusterIssuerGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuers"}
)

// CertManager is cert-manager's controller and cainjector (built by `make certmanager` into bin/)
// running beside a local control plane, or the cert-manager already installed in an external cluster.
type CertManager struct {
	// Namespace is cert-manager's cluster resource namespace (CertManagerNamespace).
	Namespace string
	// CRDDir is the folder the CRDs were installed from (empty for an external cluster).
	CRDDir string
	// CRDs are the names of the CustomResourceDefinitions installed (none for an external cluster).
	CRDs []string

	cp    *ControlPlane
	procs []*process
}

// StartCertManager installs cert-manager's CRDs from CertManagerCRDDir, creates CertManagerNamespace,
// starts cert-manager's controller (the certificates, certificaterequests (approver, SelfSigned, CA),
// issuers and clusterissuers controllers) and its cainjector, and returns once they work: a throwaway
// self-signed Certificate is Ready and the cainjector has put its CA into a throwaway
// ValidatingWebhookConfiguration (both deleted again). On error nothing is left running.
//
// The two processes log to LogPath("cert-manager-controller") and LogPath("cert-manager-cainjector"),
// listen on no port, and die with this process (even on SIGKILL, also when the control plane was
// started Detached). CertManager.Stop stops them; so does the control plane's Stop. Start at most one
// at a time per control plane.
//
// On an external cluster (FromKubeconfig) nothing is installed or started: cert-manager must already
// run there, and StartCertManager only checks that it works.
func (cp *ControlPlane) StartCertManager(ctx context.Context) (cm *CertManager, err error) {
	ctx, cancel := context.WithTimeout(ctx, certManagerStartTimeout)
	defer cancel()
	cm = &CertManager{Namespace: CertManagerNamespace, cp: cp}
	if cp.External {
		if err := cm.waitUntilWorking(ctx); err != nil {
			return nil, fmt.Errorf("cert-manager in the cluster of %s: %w", cp.Kubeconfig, err)
		}
		return cm, nil
	}
	for _, p := range cp.procs {
		if p.name == certManagerController || p.name == certManagerCAInjector {
			return nil, fmt.Errorf("%s is already running (pid %d): stop its CertManager first", p.name, p.pid())
		}
	}
	controllerBin, err := Binary(certManagerController)
	if err != nil {
		return nil, err
	}
	cainjectorBin, err := Binary(certManagerCAInjector)
	if err != nil {
		return nil, err
	}
	if cm.CRDDir, err = CertManagerCRDDir(); err != nil {
		return nil, err
	}
	if cm.CRDs, err = InstallCRDs(ctx, cp.Config, cm.CRDDir); err != nil {
		return nil, fmt.Errorf("installing cert-manager's CRDs: %w", err)
	}
	if err := EnsureNamespace(ctx, cp.Config, cm.Namespace); err != nil {
		return nil, err
	}

	defer func() {
		if err != nil {
			_ = cm.Stop()
		}
	}()
	for _, c := range []struct {
		name, bin string
		args      []string
	}{
		{certManagerController, controllerBin, []string{
			"--kubeconfig=" + cp.Kubeconfig,
			"--cluster-resource-namespace=" + cm.Namespace,
			"--v=2",
		}},
		// The cainjector watches Certificates: their CRD is installed above, before it starts.
		{certManagerCAInjector, cainjectorBin, []string{
			"--kubeconfig=" + cp.Kubeconfig,
			"--v=2",
		}},
	} {
		// Never detached: only a control plane's own components outlive a `make cluster-up`.
		proc, err := startProcess(c.name, c.bin, c.args, cp.LogPath(c.name), false)
		if err != nil {
			return nil, err
		}
		cm.procs = append(cm.procs, proc)
		// The control plane stops its processes in reverse order: cert-manager before the API server.
		cp.procs = append(cp.procs, proc)
	}
	if err := cm.waitUntilWorking(ctx); err != nil {
		return nil, err
	}
	return cm, nil
}

// Stop terminates the controller and the cainjector (SIGTERM, then SIGKILL after 10 s). The CRDs,
// the namespace and cert-manager's objects stay. It is safe to call more than once, and after the
// control plane's Stop.
func (cm *CertManager) Stop() error {
	if cm == nil {
		return nil
	}
	errs := stopAll(cm.procs)
	cm.cp.procs = slices.DeleteFunc(cm.cp.procs, func(q *process) bool { return slices.Contains(cm.procs, q) })
	cm.procs = nil
	return errors.Join(errs...)
}

// PIDs returns the process id of the controller and the cainjector by name (none for an external
// cluster or once stopped).
func (cm *CertManager) PIDs() map[string]int { return pids(cm.procs) }

// CertManagerCRDDir returns the folder of cert-manager's CRDs: COS_CERTMANAGER_CRDS_DIR (set by the
// Makefile), else the repository's bin/testdata/certmanager-crds; an error says how to fetch them.
func CertManagerCRDDir() (string, error) {
	dir := os.Getenv("COS_CERTMANAGER_CRDS_DIR")
	if dir == "" {
		var err error
		if dir, err = repoPath("bin", "testdata", "certmanager-crds"); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("cert-manager's CRDs: %w: run `make certmanager` to fetch them", err)
	}
	return dir, nil
}

// RenewCertificate triggers the re-issuance of a Certificate as `cmctl renew` does: it sets the
// Certificate's Issuing condition to True (reason ManuallyTriggered) through the status subresource.
// The new certificate is in the Secret once status.revision has grown and Issuing is gone.
func RenewCertificate(ctx context.Context, dyn dynamic.Interface, namespace, name string) error {
	api := dyn.Resource(CertificateGVR).Namespace(namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crt, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conditions, _, err := unstructured.NestedSlice(crt.Object, "status", "conditions")
		if err != nil {
			return fmt.Errorf("the status of Certificate %s/%s: %w", namespace, name, err)
		}
		issuing := map[string]any{
			"type":               "Issuing",
			"status":             "True",
			"reason":             "ManuallyTriggered",
			"message":            "Certificate re-issuance manually triggered",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			"observedGeneration": crt.GetGeneration(),
		}
		conditions = slices.DeleteFunc(conditions, func(c any) bool {
			m, _ := c.(map[string]any)
			return m["type"] == "Issuing"
		})
		if err := unstructured.SetNestedSlice(crt.Object, append(conditions, issuing), "status", "conditions"); err != nil {
			return err
		}
		_, err = api.UpdateStatus(ctx, crt, metav1.UpdateOptions{})
		return err
	})
}

// ConditionTrue reports whether a cert-manager object (Certificate, Issuer, ClusterIssuer, ...) has a
// status condition of this type with status True that is not older than its spec.
func ConditionTrue(obj *unstructured.Unstructured, conditionType string) bool {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] != conditionType {
			continue
		}
		if gen, ok := m["observedGeneration"].(int64); ok && gen < obj.GetGeneration() {
			return false
		}
		return m["status"] == "True"
	}
	return false
}

// waitUntilWorking issues a throwaway self-signed Certificate and has the cainjector inject its CA
// into a throwaway ValidatingWebhookConfiguration, then deletes them.
func (cm *CertManager) waitUntilWorking(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(cm.cp.Config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cm.cp.Config)
	if err != nil {
		return err
	}
	crds, err := cs.Discovery().ServerResourcesForGroupVersion(CertificateGVR.GroupVersion().String())
	if err != nil || !slices.ContainsFunc(crds.APIResources, func(r metav1.APIResource) bool { return r.Name == CertificateGVR.Resource }) {
		return fmt.Errorf("cert-manager's CRDs are not installed (%s: %v)", CertificateGVR.GroupVersion(), err)
	}
	if cm.cp.External {
		if err := EnsureNamespace(ctx, cm.cp.Config, cm.Namespace); err != nil {
			return err
		}
	}

	name := "startup-check-" + utilrand.String(5)
	ns := cm.Namespace
	issuer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"selfSigned": map[string]any{}},
	}}
	crt := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"commonName": name,
			"secretName": name,
			"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256)},
			"issuerRef":  map[string]any{"name": name, "kind": "Issuer", "group": "cert-manager.io"},
		},
	}}
	webhook := InertWebhookConfiguration(name, ns+"/"+name)
	defer func() {
		// A fresh context: also clean up when ctx has ended.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, webhook.Name, metav1.DeleteOptions{})
		_ = dyn.Resource(CertificateGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
		_ = dyn.Resource(IssuerGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
		_ = cs.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}()
	if _, err := dyn.Resource(IssuerGVR).Namespace(ns).Create(ctx, issuer, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := dyn.Resource(CertificateGVR).Namespace(ns).Create(ctx, crt, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhook, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := cm.cp.poll(ctx, "cert-manager to issue Certificate "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(CertificateGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: poll again
		}
		return ConditionTrue(obj, "Ready"), nil
	}); err != nil {
		return err
	}
	return cm.cp.poll(ctx, "the cert-manager cainjector to fill the caBundle of "+webhook.Name, func(ctx context.Context) (bool, error) {
		secret, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: poll again
		}
		wc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhook.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: poll again
		}
		ca := secret.Data["ca.crt"]
		return len(ca) > 0 && string(wc.Webhooks[0].ClientConfig.CABundle) == string(ca), nil
	})
}

// InertWebhookConfiguration returns a ValidatingWebhookConfiguration "cert-manager-<name>" that asks
// cert-manager's cainjector to fill its caBundle from the Certificate injectFrom ("namespace/name"),
// and whose one webhook is never called: its rule names a group that serves nothing.
func InertWebhookConfiguration(name, injectFrom string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "cert-manager-" + name,
			Annotations: map[string]string{"cert-manager.io/inject-ca-from": injectFrom},
		},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    name + ".cert-manager.invalid",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/" + name)},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{name + ".cert-manager.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"nothing"},
				},
			}},
		}},
	}
}
