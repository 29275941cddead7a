// Package deploy_test checks the kustomize overlays of config/: each renders with the kubectl of the
// control plane, holds what it must and nothing it must not (the webhook-only overlay: no CRD, no
// wildcard rule), and a server-side dry run of all of it is accepted by a real API server.
package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

func TestMain(m *testing.M) {
	testenv.Run(m)
}

// Names the overlays agree on.
const (
	systemNamespace = olmv1.DefaultSystemNamespace
	deploymentName  = "cos-externalizer"
	serviceAccount  = "cos-externalizer"
	webhookService  = "cos-externalizer-webhook"
	metricsService  = "cos-externalizer-metrics"
	certificateName = "cos-externalizer-serving-cert"
	rolloutRole     = "cos-externalizer-rollout"
	fieldManager    = "cos-externalizer-deploy"
)

// overlay is one kustomization of config/ and what it must hold.
type overlay struct {
	name string
	// install: the manager and its webhooks; the flags below apply only then.
	install     bool
	crd         bool  // the ClusterObjectSet CRD
	namespace   bool  // the Namespace olmv1-system
	rollout     bool  // the manager rolls out: the rollout ClusterRole, bound; no --rollout=false
	certManager bool  // cert-manager issues the serving certificate
	replicas    int32 // of the manager; 0 means 2
	// prerequisites are the CRD folders the dry run needs installed first (besides the COS CRD,
	// which the test environment installs).
	prerequisites func(t *testing.T) []string
}

var overlays = []overlay{
	{name: "default", install: true, crd: true, namespace: true, rollout: true, certManager: true, prerequisites: certManagerCRDs},
	{name: "self-signed", install: true, crd: true, namespace: true, rollout: true},
	// OLM owns the CRD and the namespace, and rolls out itself.
	{name: "webhook-only", install: true, certManager: true, prerequisites: certManagerCRDs},
	{name: "production", install: true, crd: true, namespace: true, rollout: true, certManager: true, prerequisites: certManagerCRDs, replicas: 3},
	{name: "prometheus", prerequisites: prometheusOperatorCRDs},
}

// TestOverlaysRender renders every overlay and checks what it holds.
func TestOverlaysRender(t *testing.T) {
	for _, o := range overlays {
		t.Run(o.name, func(t *testing.T) {
			yaml := render(t, o.name)
			for _, placeholder := range []string{"SERVICE_NAME", "SERVICE_NAMESPACE", "CERTIFICATE_NAME", "CERTIFICATE_NAMESPACE", "CERTIFICATE_SECRET_NAME"} {
				if bytes.Contains(yaml, []byte(placeholder)) {
					t.Errorf("placeholder %s left in the rendered overlay", placeholder)
				}
			}
			objs := parse(t, yaml)
			for _, u := range objs {
				if ns := u.GetNamespace(); ns != "" && ns != systemNamespace {
					t.Errorf("%s %s is in namespace %s, want %s", u.GetKind(), u.GetName(), ns, systemNamespace)
				}
			}
			if o.install {
				checkInstall(t, o, objs)
			} else {
				checkMonitoring(t, objs)
			}
		})
	}
}

// TestOverlaysServerDryRun installs each overlay's prerequisites and has the API server accept a
// server-side dry run of all its objects (schemas, CEL of the webhooks' matchConditions, RBAC
// escalation checks, the restricted Pod Security Standard of the namespace), writing nothing.
func TestOverlaysServerDryRun(t *testing.T) {
	ctx := context.Background()
	// Namespaced objects cannot even be dry-run into a missing namespace.
	applySystemNamespace(t)
	for _, o := range overlays {
		t.Run(o.name, func(t *testing.T) {
			if o.prerequisites != nil {
				for _, dir := range o.prerequisites(t) {
					if _, err := controlplane.InstallCRDs(ctx, testenv.Env.Config, dir); err != nil {
						t.Fatal(err)
					}
				}
			}
			yaml := render(t, o.name)
			out, stderr := mustKubectl(t, yaml, "apply", "--server-side", "--dry-run=server", "--field-manager="+fieldManager, "-f", "-")
			if strings.Contains(stderr, "Warning") {
				t.Errorf("the dry run warned:\n%s", stderr)
			}
			objs := parse(t, yaml)
			if n := strings.Count(out, "(server dry run)"); n != len(objs) {
				t.Errorf("the dry run applied %d objects, the overlay has %d:\n%s", n, len(objs), out)
			}
			// A dry run writes nothing.
			for _, u := range objs {
				if u.GetKind() != "Namespace" && u.GetKind() != "CustomResourceDefinition" {
					got := &unstructured.Unstructured{}
					got.SetGroupVersionKind(u.GroupVersionKind())
					err := testenv.Env.Client.Get(ctx, client.ObjectKeyFromObject(u), got)
					if !apierrors.IsNotFound(err) {
						t.Errorf("%s %s exists after the dry run (%v)", u.GetKind(), u.GetName(), err)
					}
				}
			}
		})
	}
}

// applySystemNamespace applies default's Namespace for real, as deploy does (Pod Security admission
// reads its labels).
func applySystemNamespace(t *testing.T) {
	t.Helper()
	for _, u := range parse(t, render(t, "default")) {
		if u.GetKind() == "Namespace" {
			mustKubectl(t, mustJSON(t, u), "apply", "--server-side", "--field-manager="+fieldManager, "-f", "-")
		}
	}
}

// checkInstall checks an overlay that installs the manager.
func checkInstall(t *testing.T, o overlay, objs []*unstructured.Unstructured) {
	t.Helper()
	has := func(kind, name string) bool { return find(objs, kind, name) != nil }
	if got := has("CustomResourceDefinition", "clusterobjectsets.olm.operatorframework.io"); got != o.crd {
		t.Errorf("holds the ClusterObjectSet CRD: %t, want %t", got, o.crd)
	}
	if got := has("Namespace", systemNamespace); got != o.namespace {
		t.Errorf("holds the Namespace %s: %t, want %t", systemNamespace, got, o.namespace)
	}
	for _, kind := range []string{"Issuer", "Certificate"} {
		if got := len(ofKind(objs, kind)) > 0; got != o.certManager {
			t.Errorf("holds a cert-manager %s: %t, want %t", kind, got, o.certManager)
		}
	}

	deploy := &appsv1.Deployment{}
	convert(t, find(objs, "Deployment", deploymentName), deploy)
	checkDeployment(t, o, deploy)
	checkWebhooks(t, o, objs, deploy)
	checkRBAC(t, o, objs)

	// The metrics Service reaches the metrics port.
	svc := &corev1.Service{}
	convert(t, find(objs, "Service", metricsService), svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.StrVal != "metrics" ||
		!selects(svc.Spec.Selector, deploy.Spec.Template.Labels) {
		t.Errorf("metrics Service: ports %+v, selector %v, want 8443 -> metrics of the manager's pods", svc.Spec.Ports, svc.Spec.Selector)
	}
}

func checkDeployment(t *testing.T, o overlay, d *appsv1.Deployment) {
	t.Helper()
	replicas := o.replicas
	if replicas == 0 {
		replicas = 2
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		t.Errorf("replicas %v, want %d", d.Spec.Replicas, replicas)
	}
	pod := d.Spec.Template.Spec
	// Spread over zones and nodes, never refusing to schedule.
	var keys []string
	for _, c := range pod.TopologySpreadConstraints {
		keys = append(keys, c.TopologyKey)
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.LabelSelector == nil || !selects(c.LabelSelector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("topology spread over %s: %+v; want ScheduleAnyway over the manager's pods", c.TopologyKey, c)
		}
	}
	if !slices.Equal(keys, []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}) {
		t.Errorf("topology spread keys %q, want zone and hostname", keys)
	}
	if pod.ServiceAccountName != serviceAccount {
		t.Errorf("serviceAccountName %q, want %q", pod.ServiceAccountName, serviceAccount)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", sc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "cos-externalizer:dev" {
		t.Errorf("image %q, want cos-externalizer:dev", c.Image)
	}
	// The serving certificate: cert-manager's Secret read through the API server, or the manager's own.
	want := []string{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081",
		"--system-namespace=" + olmv1.DefaultSystemNamespace, "--webhook-cert-source=self-signed"}
	if o.certManager {
		want[4] = "--webhook-cert-source=secret"
	}
	if !o.rollout {
		want = append(want, "--rollout=false", webhookOnlyExemption)
	}
	if !slices.Equal(c.Args, want) {
		t.Errorf("args %q, want %q", c.Args, want)
	}
	// A rolling update drops no admission request: the Pod serves on while it leaves the endpoints.
	if l := c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds < 5 ||
		l.PreStop.Sleep.Seconds >= *pod.TerminationGracePeriodSeconds {
		t.Errorf("preStop %+v: want a sleep of at least 5 s, within terminationGracePeriodSeconds", c.Lifecycle)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want no privilege escalation, a read-only root and all capabilities dropped", sc)
	}
	// Requests for both; a memory limit, and no CPU limit (throttling would stall admission requests).
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() ||
		!c.Resources.Limits.Cpu().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests, a memory limit and no CPU limit", c.Resources)
	}
	if pod.PriorityClassName != "system-cluster-critical" || pod.NodeSelector[corev1.LabelOSStable] != "linux" {
		t.Errorf("priorityClassName %q, nodeSelector %v: want system-cluster-critical on linux", pod.PriorityClassName, pod.NodeSelector)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || containerPort(c, probe.HTTPGet.Port.StrVal) != 8081 {
			t.Errorf("probe %+v: want %s on 8081", probe, path)
		}
	}
	if containerPort(c, "webhook-server") != 9443 || containerPort(c, "metrics") != 8443 {
		t.Errorf("ports %+v: want webhook-server 9443 and metrics 8443", c.Ports)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	if v, ok := volumes[mounts["/tmp"]]; !ok || v.EmptyDir == nil {
		t.Errorf("/tmp is not an emptyDir: mounts %v", mounts)
	}
	// No Secret is mounted: the certificate is read through the API server, without kubelet's delay.
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			t.Errorf("volume %s mounts Secret %s", v.Name, v.Secret.SecretName)
		}
	}
}

// checkWebhooks checks the webhook configurations: as generated (fail closed, timeouts, conditions)
// and pointing at the webhook Service, which reaches the manager's webhook port; with cert-manager,
// the Certificate covers the Service's names, its Secret is what the manager mounts, and its CA is
// injected into both configurations.
func checkWebhooks(t *testing.T, o overlay, objs []*unstructured.Unstructured, deploy *appsv1.Deployment) {
	t.Helper()
	svc := &corev1.Service{}
	convert(t, find(objs, "Service", webhookService), svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.StrVal != "webhook-server" ||
		!selects(svc.Spec.Selector, deploy.Spec.Template.Labels) {
		t.Errorf("webhook Service: ports %+v, selector %v, want 443 -> webhook-server of the manager's pods", svc.Spec.Ports, svc.Spec.Selector)
	}

	type hook struct {
		name       string
		cc         admissionregistrationv1.WebhookClientConfig
		policy     *admissionregistrationv1.FailurePolicyType
		timeout    *int32
		conditions []admissionregistrationv1.MatchCondition
	}
	var hooks []hook
	var configs []client.Object
	for _, u := range ofKind(objs, "MutatingWebhookConfiguration") {
		wc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		convert(t, u, wc)
		for _, w := range wc.Webhooks {
			hooks = append(hooks, hook{w.Name, w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds, w.MatchConditions})
		}
		configs = append(configs, wc)
	}
	for _, u := range ofKind(objs, "ValidatingWebhookConfiguration") {
		wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		convert(t, u, wc)
		for _, w := range wc.Webhooks {
			hooks = append(hooks, hook{w.Name, w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds, w.MatchConditions})
		}
		configs = append(configs, wc)
	}
	if len(configs) != 2 || len(hooks) != 4 {
		t.Errorf("%d webhook configurations with %d webhooks, want 2 with 4", len(configs), len(hooks))
	}
	for _, h := range hooks {
		s := h.cc.Service
		if s == nil || s.Name != webhookService || s.Namespace != systemNamespace || (s.Port != nil && *s.Port != 443) {
			t.Errorf("webhook %s calls %+v, want Service %s/%s on 443", h.name, s, systemNamespace, webhookService)
		}
		// Fail closed, but for the check of a refs-only create's refs: warnings only.
		want := admissionregistrationv1.Fail
		if h.name == "check-refs.cos-externalizer.io" {
			want = admissionregistrationv1.Ignore
		}
		if h.policy == nil || *h.policy != want || h.timeout == nil {
			t.Errorf("webhook %s: failurePolicy %v, timeout %v: want %s and an explicit timeout", h.name, h.policy, h.timeout, want)
		}
		// The ClusterObjectSet webhooks are called only for what needs them (refs-only
		// ClusterObjectSets, OLM's, pass with the manager down); the guard, which selects by label,
		// is never called for its exempt users (the namespace controller).
		if len(h.conditions) == 0 {
			t.Errorf("webhook %s has no matchConditions", h.name)
		}
	}

	var cert *unstructured.Unstructured
	if o.certManager {
		cert = find(objs, "Certificate", certificateName)
		dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		want := []string{webhookService + "." + systemNamespace + ".svc", webhookService + "." + systemNamespace + ".svc.cluster.local"}
		if !slices.Equal(dnsNames, want) {
			t.Errorf("Certificate dnsNames %q, want %q", dnsNames, want)
		}
		// The manager reads the Secret the Certificate writes (--webhook-cert-secret, or its default).
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		read := certs.DefaultCertSecret
		for _, a := range deploy.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--webhook-cert-secret="); ok {
				read = v
			}
		}
		if secretName == "" || read != secretName {
			t.Errorf("the manager reads Secret %q, the Certificate writes %q", read, secretName)
		}
		// The serving certificate is signed by a CA Issuer, so a renewal leaves the injected CA as it is.
		issuerName, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		if issuer := find(objs, "Issuer", issuerName); issuer == nil {
			t.Errorf("the Certificate's Issuer %q is not in the overlay", issuerName)
		} else if caSecret, _, _ := unstructured.NestedString(issuer.Object, "spec", "ca", "secretName"); caSecret == "" {
			t.Errorf("the Certificate's Issuer %q is not a CA Issuer", issuerName)
		}
	}
	for _, wc := range configs {
		got := wc.GetAnnotations()["cert-manager.io/inject-ca-from"]
		want := ""
		if o.certManager {
			want = systemNamespace + "/" + certificateName
		}
		if got != want {
			t.Errorf("%T %s: cert-manager.io/inject-ca-from %q, want %q", wc, wc.GetName(), got, want)
		}
	}
}

// checkRBAC checks least privilege: no wildcard but in the rollout ClusterRole (bound only where
// the manager rolls out); cluster-wide only get on Secrets; the system namespace's Secrets, the
// leader election Lease; every binding binds a role of the overlay to the manager's ServiceAccount.
func checkRBAC(t *testing.T, o overlay, objs []*unstructured.Unstructured) {
	t.Helper()
	if find(objs, "ServiceAccount", serviceAccount) == nil {
		t.Errorf("no ServiceAccount %s", serviceAccount)
	}
	type role struct {
		kind, name string
		rules      []rbacv1.PolicyRule
	}
	roles := map[string]role{}
	for _, u := range append(ofKind(objs, "ClusterRole"), ofKind(objs, "Role")...) {
		var rules []rbacv1.PolicyRule
		if u.GetKind() == "ClusterRole" {
			r := &rbacv1.ClusterRole{}
			convert(t, u, r)
			rules = r.Rules
		} else {
			r := &rbacv1.Role{}
			convert(t, u, r)
			rules = r.Rules
		}
		roles[u.GetKind()+"/"+u.GetName()] = role{u.GetKind(), u.GetName(), rules}
	}
	bound := map[string]bool{}
	for _, u := range append(ofKind(objs, "ClusterRoleBinding"), ofKind(objs, "RoleBinding")...) {
		b := &rbacv1.RoleBinding{} // a ClusterRoleBinding has the same roleRef and subjects
		convert(t, u, b)
		ref := b.RoleRef.Kind + "/" + b.RoleRef.Name
		if _, ok := roles[ref]; !ok {
			t.Errorf("%s %s binds %s, which the overlay does not hold", u.GetKind(), u.GetName(), ref)
		}
		bound[ref] = true
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != serviceAccount || b.Subjects[0].Namespace != systemNamespace {
			t.Errorf("%s %s binds %+v, want the manager's ServiceAccount", u.GetKind(), u.GetName(), b.Subjects)
		}
	}

	var secretVerbsInNamespace []string
	leases := false
	for key, r := range roles {
		wildcard := false
		for _, rule := range r.rules {
			if slices.Contains(rule.APIGroups, "*") || slices.Contains(rule.Resources, "*") || slices.Contains(rule.Verbs, "*") {
				wildcard = true
			}
			if slices.Contains(rule.Resources, "secrets") && slices.Contains(rule.APIGroups, "") {
				if r.kind == "ClusterRole" && !slices.Equal(rule.Verbs, []string{"get"}) {
					t.Errorf("%s grants %q on Secrets cluster-wide, want only get", key, rule.Verbs)
				}
				if r.kind == "Role" {
					secretVerbsInNamespace = append(secretVerbsInNamespace, rule.Verbs...)
				}
			}
			if r.kind == "Role" && slices.Contains(rule.Resources, "leases") && slices.Contains(rule.Verbs, "update") {
				leases = true
			}
		}
		if wildcard && r.name != rolloutRole {
			t.Errorf("%s has a wildcard rule", key)
		}
		if r.name == rolloutRole && !wildcard {
			t.Errorf("%s has no wildcard rule", key)
		}
	}
	slices.Sort(secretVerbsInNamespace)
	if want := []string{"create", "delete", "get", "list", "patch", "watch"}; !slices.Equal(secretVerbsInNamespace, want) {
		t.Errorf("Secrets of %s: verbs %q, want %q", systemNamespace, secretVerbsInNamespace, want)
	}
	if !leases {
		t.Errorf("no Role lets the manager renew its leader election Lease")
	}
	_, hasRollout := roles["ClusterRole/"+rolloutRole]
	if hasRollout != o.rollout || bound["ClusterRole/"+rolloutRole] != o.rollout {
		t.Errorf("ClusterRole %s present %t, bound %t; want %t", rolloutRole, hasRollout, bound["ClusterRole/"+rolloutRole], o.rollout)
	}
	reader, ok := roles["ClusterRole/cos-externalizer-metrics-reader"]
	if !ok || len(reader.rules) != 1 || !slices.Equal(reader.rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(reader.rules[0].Verbs, []string{"get"}) {
		t.Errorf("no metrics-reader ClusterRole with get on /metrics: %+v", reader)
	}
	if bound["ClusterRole/cos-externalizer-metrics-reader"] {
		t.Errorf("the metrics-reader ClusterRole is bound to the manager; it is for scrapers")
	}
	// The metrics endpoint authenticates and authorizes its clients through the API server.
	for _, review := range []string{"tokenreviews", "subjectaccessreviews"} {
		found := false
		for _, r := range roles {
			for _, rule := range r.rules {
				if r.kind == "ClusterRole" && slices.Contains(rule.Resources, review) && slices.Contains(rule.Verbs, "create") {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("no ClusterRole lets the manager create %s", review)
		}
	}
}

// checkMonitoring checks the prometheus overlay: a ServiceMonitor that selects the metrics Service
// of the install and scrapes its port, and alerts on the metrics the manager exports.
func checkMonitoring(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var kinds []string
	for _, u := range objs {
		kinds = append(kinds, u.GetKind())
	}
	slices.Sort(kinds)
	if !slices.Equal(kinds, []string{"ClusterRoleBinding", "PrometheusRule", "Secret", "ServiceAccount", "ServiceMonitor"}) {
		t.Fatalf("kinds %q, want a PrometheusRule, a ServiceMonitor and its scraper's ServiceAccount, token Secret and binding", kinds)
	}
	svc := &corev1.Service{}
	convert(t, find(parse(t, render(t, "default")), "Service", metricsService), svc)
	monitor := ofKind(objs, "ServiceMonitor")[0]
	selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	if len(selector) == 0 || !selects(selector, svc.Labels) {
		t.Errorf("the ServiceMonitor selects %v, the metrics Service is labelled %v", selector, svc.Labels)
	}
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name || endpoints[0].(map[string]any)["scheme"] != "https" {
		t.Errorf("the ServiceMonitor scrapes %v, want https on port %s", endpoints, svc.Spec.Ports[0].Name)
	}
	// The scraper's token from its Secret, and the webhooks' certificate verified with cert-manager's CA.
	token := find(objs, "Secret", "cos-externalizer-metrics-scraper-token")
	binding := &rbacv1.ClusterRoleBinding{}
	convert(t, find(objs, "ClusterRoleBinding", "cos-externalizer-metrics-scraper"), binding)
	if token == nil || token.GetAnnotations()[corev1.ServiceAccountNameKey] != binding.Subjects[0].Name ||
		binding.RoleRef.Name != "cos-externalizer-metrics-reader" || binding.Subjects[0].Namespace != systemNamespace {
		t.Errorf("the scraper's token Secret %v and binding %+v do not match", token, binding)
	}
	if len(endpoints) == 1 {
		ep := endpoints[0].(map[string]any)
		creds, _, _ := unstructured.NestedStringMap(ep, "authorization", "credentials")
		ca, _, _ := unstructured.NestedStringMap(ep, "tlsConfig", "ca", "secret")
		serverName, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
		if ep["bearerTokenFile"] != nil || creds["name"] != "cos-externalizer-metrics-scraper-token" || creds["key"] != "token" ||
			ca["name"] != "cos-externalizer-webhook-cert" || ca["key"] != "ca.crt" || serverName != webhookService+"."+systemNamespace+".svc" {
			t.Errorf("the ServiceMonitor's endpoint %v: want the scraper's token and the webhook certificate's CA", ep)
		}
	}
	rules := fmt.Sprint(ofKind(objs, "PrometheusRule")[0].Object["spec"])
	for _, metric := range []string{`cos_externalizer_admission_refusals_total`, `cos_externalizer_clusterobjectsets{job="cos-externalizer-metrics", namespace="olmv1-system", reason="Blocked"}`,
		`cos_externalizer_orphaned_secrets`, `cos_externalizer_admission_duration_seconds_bucket`} {
		if !strings.Contains(rules, metric) {
			t.Errorf("no alert on %s", metric)
		}
	}
}

// forEachInstall runs check, as a subtest, on the rendered objects of every overlay that installs.
func forEachInstall(t *testing.T, check func(t *testing.T, o overlay, objs []*unstructured.Unstructured)) {
	for _, o := range overlays {
		if !o.install {
			continue
		}
		t.Run(o.name, func(t *testing.T) { check(t, o, parse(t, render(t, o.name))) })
	}
}

// render runs kubectl kustomize on config/<name>.
func render(t *testing.T, name string) []byte {
	t.Helper()
	return testenv.Kustomize(t, name)
}

func parse(t *testing.T, yaml []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Parse(yaml)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("the overlay renders no objects")
	}
	return objs
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range ofKind(objs, kind) {
		if u.GetName() == name {
			return u
		}
	}
	return nil
}

// convert turns a rendered object into its typed form, failing the test when it is missing.
func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if u == nil {
		t.Fatalf("the overlay holds no %T", into)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// selects reports whether every label of selector is in labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// certManagerCRDs is the folder of cert-manager's CRDs (controlplane.CertManagerCRDDir).
func certManagerCRDs(t *testing.T) []string {
	t.Helper()
	dir, err := controlplane.CertManagerCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	return []string{dir}
}

// prometheusOperatorCRDs is a folder with the two CRDs of the Prometheus Operator that
// config/prometheus uses, from the test bundle of `make testdata`.
func prometheusOperatorCRDs(t *testing.T) []string {
	t.Helper()
	bundle, err := builders.BundleDir("prometheus-operator-crds")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		b, err := os.ReadFile(filepath.Join(bundle, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{dir}
}

func mustJSON(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	b, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustKubectl runs the control plane's kubectl against the test cluster.
var mustKubectl = testenv.MustKubectl
