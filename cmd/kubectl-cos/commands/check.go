package commands

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// webhookSuffix ends the names of cos-externalizer's webhooks.
const webhookSuffix = ".cos-externalizer.io"

// injectCAAnnotation is cert-manager's CA injector's annotation.
const injectCAAnnotation = "cert-manager.io/inject-ca-from"

type checkOptions struct {
	*root
	timeout time.Duration
	output  string
}

func (r *root) checkCommand() *cobra.Command {
	o := &checkOptions{root: r}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check that the webhook is installed, trusted and reachable",
		Long: `Check, in plain sentences, that the cluster can externalize ClusterObjectSets:

  the ClusterObjectSet API is served;
  cos-externalizer's webhook configurations are installed and their CA bundle is injected (present,
  a certificate, not expired);
  the manager authenticates the callers of its webhook port (--webhook-client-ca): a warning when
  it accepts anyone;
  the webhook's Service has ready endpoints;
  a manager leads (holds the leader Lease), and so rolls ClusterObjectSets out: a warning when none
  does (a ClusterObjectSet nobody reconciles still shows the status last written);
  a server-side dry run of a small inline ClusterObjectSet comes back externalized (nothing is
  written), which proves the API server trusts and reaches the webhook.

-o json prints the same findings as data for CI (documented in docs/plugin.md); the exit status is
the same: 1 when a check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 30*time.Second, "How long to wait for the dry run.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", `Output format: empty for the report, or json: {"passed": bool, "findings": [{"check", "result" (ok, warn or fail), "message"}]}, for CI. The exit status is the same.`)
	return cmd
}

// checker prints findings and counts failures.
type checker struct {
	o     *checkOptions
	fails int
	// mode is the install's mode, which the advice is for.
	mode installMode
	// findings are the report's lines so far.
	findings []Finding
	// namespace is the manager's, when found (through the webhooks' Service); empty when not.
	namespace string
	// err is the first error writing the report; the command fails with it.
	err error
}

// The results of one finding.
const (
	resultOK   = "ok"
	resultWarn = "warn"
	resultFail = "fail"
)

// Finding is one line of check's report; -o json prints them as they are.
type Finding struct {
	// Check is what was checked: api, webhooks, mode, callers, ca-bundle, endpoints, certificate,
	// reconciler, dry-run.
	Check string `json:"check"`
	// Result is ok, warn or fail.
	Result string `json:"result"`
	// Message is the sentence the text report prints.
	Message string `json:"message"`
}

// CheckReport is what check -o json prints: Passed is false when a finding failed (and check exits
// 1); the findings are in the order the text report prints them.
type CheckReport struct {
	Passed   bool      `json:"passed"`
	Findings []Finding `json:"findings"`
}

func (c *checker) ok(check, format string, args ...any)   { c.add(check, resultOK, format, args...) }
func (c *checker) warn(check, format string, args ...any) { c.add(check, resultWarn, format, args...) }
func (c *checker) fail(check, format string, args ...any) {
	c.fails++
	c.add(check, resultFail, format, args...)
}

// resultPrefix is each result's prefix in the text report.
var resultPrefix = map[string]string{resultOK: "[ok]   ", resultWarn: "[warn] ", resultFail: "[FAIL] "}

func (c *checker) add(check, result, format string, args ...any) {
	f := Finding{Check: check, Result: result, Message: fmt.Sprintf(format, args...)}
	c.findings = append(c.findings, f)
	if c.o.output == "" && c.err == nil {
		_, c.err = fmt.Fprintln(c.o.Out, resultPrefix[result]+f.Message)
	}
}

// finish prints the JSON report (-o json) and returns the command's error: ExitError 1 when a check
// failed.
func (c *checker) finish() error {
	if c.o.output == "json" && c.err == nil {
		b, err := json.MarshalIndent(CheckReport{Passed: c.fails == 0, Findings: c.findings}, "", "  ")
		if err != nil {
			return err
		}
		_, c.err = fmt.Fprintln(c.o.Out, string(b))
	}
	if c.err != nil {
		return fmt.Errorf("writing the report: %w", c.err)
	}
	if c.fails > 0 {
		return &ExitError{Code: 1}
	}
	return nil
}

func (o *checkOptions) run(ctx context.Context) error {
	if o.output != "" && o.output != "json" {
		return fmt.Errorf("--output: %q is not json (or empty for the report)", o.output)
	}
	cl, err := o.clients()
	if err != nil {
		return err
	}
	c := &checker{o: o}
	if c.api(cl) {
		c.webhooks(ctx, cl)
		c.reconciler(ctx, cl)
		c.dryRun(ctx, cl)
	}
	return c.finish()
}

// api checks that the ClusterObjectSet API is served; the other checks need it.
func (c *checker) api(cl *clients) bool {
	res, err := cl.kube.Discovery().ServerResourcesForGroupVersion(olmv1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		c.fail("api", "The ClusterObjectSet API (%s) is not served: install its CustomResourceDefinition (make deploy, or OLM) first.", olmv1.GroupVersion)
		return false
	case err != nil:
		c.fail("api", "Cannot ask the API server at %s which APIs it serves: %v", cl.config.Host, err)
		return false
	}
	for _, r := range res.APIResources {
		if r.Name == "clusterobjectsets" {
			c.ok("api", "The ClusterObjectSet API (%s) is served.", olmv1.GroupVersion)
			return true
		}
	}
	c.fail("api", "The API group %s is served, but without clusterobjectsets: install the ClusterObjectSet CustomResourceDefinition.", olmv1.GroupVersion)
	return false
}

// webhook is one of our webhooks as configured.
type webhook struct {
	config, kind, name string
	annotations        map[string]string
	client             admissionregistrationv1.WebhookClientConfig
}

// webhooks checks the webhook configurations' CA bundles and the Services' endpoints.
func (c *checker) webhooks(ctx context.Context, cl *clients) {
	var hooks []webhook
	mutating, err := cl.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		c.warn("webhooks", "Cannot list the mutating webhook configurations (%s); the CA bundles are not checked, the dry run below still is.", reason(err))
		return
	}
	for _, cfg := range mutating.Items {
		for _, w := range cfg.Webhooks {
			if strings.HasSuffix(w.Name, webhookSuffix) {
				hooks = append(hooks, webhook{config: cfg.Name, kind: "MutatingWebhookConfiguration", name: w.Name, annotations: cfg.Annotations, client: w.ClientConfig})
			}
		}
	}
	validating, err := cl.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		c.warn("webhooks", "Cannot list the validating webhook configurations (%s); their CA bundles are not checked.", reason(err))
	} else {
		for _, cfg := range validating.Items {
			for _, w := range cfg.Webhooks {
				if strings.HasSuffix(w.Name, webhookSuffix) {
					hooks = append(hooks, webhook{config: cfg.Name, kind: "ValidatingWebhookConfiguration", name: w.Name, annotations: cfg.Annotations, client: w.ClientConfig})
				}
			}
		}
	}
	if len(hooks) == 0 {
		c.fail("webhooks", "No cos-externalizer webhook is installed (no webhook named *%s): inline ClusterObjectSets are stored as written, and large ones are refused. kubectl cos apply still works without it.", webhookSuffix)
		return
	}
	c.detectMode(ctx, cl, hooks)
	services := map[string]bool{}
	for _, h := range hooks {
		c.caBundle(h)
		if s := h.client.Service; s != nil && !services[s.Namespace+"/"+s.Name] {
			services[s.Namespace+"/"+s.Name] = true
			c.endpoints(ctx, cl, h)
		}
	}
}

// caBundle checks one webhook's CA bundle.
func (c *checker) caBundle(h webhook) {
	where := fmt.Sprintf("webhook %s (%s %s)", h.name, h.kind, h.config)
	if len(h.client.CABundle) == 0 {
		c.fail("ca-bundle", "The CA bundle of %s is empty: %s", where, c.mode.emptyBundle())
		return
	}
	var certs []*x509.Certificate
	rest := h.client.CABundle
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, cert)
		}
	}
	if len(certs) == 0 {
		c.fail("ca-bundle", "The CA bundle of %s holds no PEM certificate: the API server cannot verify the webhook.", where)
		return
	}
	now := time.Now()
	valid := 0
	for _, cert := range certs {
		if now.Before(cert.NotAfter) && now.After(cert.NotBefore) {
			valid++
		}
	}
	if valid == 0 {
		c.fail("ca-bundle", "Every CA certificate in the bundle of %s has expired or is not valid yet (the first expired %s): the webhook's certificate cannot be verified.", where, certs[0].NotAfter.UTC().Format(time.RFC3339))
		return
	}
	target := "its URL"
	if s := h.client.Service; s != nil {
		target = fmt.Sprintf("Service %s/%s", s.Namespace, s.Name)
	}
	c.ok("ca-bundle", "The CA of %s is injected (%s, valid until %s); the API server calls %s.", where, certs[0].Subject.CommonName, certs[0].NotAfter.UTC().Format("2006-01-02"), target)
}

// endpoints checks that the webhook's Service has ready endpoints.
func (c *checker) endpoints(ctx context.Context, cl *clients, h webhook) {
	s := h.client.Service
	slices, err := cl.kube.DiscoveryV1().EndpointSlices(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + s.Name})
	if err != nil {
		c.warn("endpoints", "Cannot list the endpoints of Service %s/%s (%s); the dry run below checks that the webhook answers.", s.Namespace, s.Name, reason(err))
		return
	}
	ready := 0
	for _, sl := range slices.Items {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready++
			}
		}
	}
	if ready == 0 {
		c.fail("endpoints", "Service %s/%s has no ready endpoints: the manager is not running or not ready, so the API server cannot reach the webhook.", s.Namespace, s.Name)
		return
	}
	c.ok("endpoints", "Service %s/%s has %d ready endpoint(s).", s.Namespace, s.Name, ready)
}

// warningCollector keeps the API server's warnings of one request.
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// dryRun sends a small inline ClusterObjectSet as a server-side dry run and expects it back
// externalized.
func (c *checker) dryRun(ctx context.Context, cl *clients) {
	cfg := rest.CopyConfig(cl.config)
	collector := &warningCollector{}
	cfg.WarningHandler = collector
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		c.fail("dry-run", "Cannot make a client: %v", err)
		return
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := "kubectl-cos-check-" + hex.EncodeToString(suffix)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": olmv1.GroupVersion.String(), "kind": olmv1.ClusterObjectSetKind,
		"metadata": map[string]any{"name": name, "annotations": map[string]any{admission.Annotation: string(admission.ModeAlways)}},
		"spec": map[string]any{
			"lifecycleState": string(olmv1.LifecycleStateActive), "revision": int64(1), "collisionProtection": string(olmv1.CollisionProtectionPrevent),
			"phases": []any{map[string]any{"name": "configuration", "objects": []any{map[string]any{"object": map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"},
				"data": map[string]any{"check": "kubectl cos check"},
			}}}}},
		},
	}}
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout)
	defer cancel()
	out, err := dyn.Resource(cosGVR).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		c.fail("dry-run", "%s", explain(err, c.mode))
		return
	}
	objects, _, _ := unstructured.NestedSlice(out.Object, "spec", "phases")
	externalized := false
	if len(objects) == 1 {
		members, _, _ := unstructured.NestedSlice(objects[0].(map[string]any), "objects")
		if len(members) == 1 {
			_, externalized = members[0].(map[string]any)["ref"]
		}
	}
	if !externalized {
		c.fail("dry-run", "A server-side dry run of an inline ClusterObjectSet with %s=always came back unchanged: the mutating webhook did not run. Is its MutatingWebhookConfiguration installed and does it match ClusterObjectSets?", admission.Annotation)
		return
	}
	c.ok("dry-run", "A server-side dry run of an inline ClusterObjectSet came back externalized: the API server trusts and reaches the webhooks (nothing was written).")
	for _, w := range collector.warnings {
		if !strings.HasPrefix(w, "cos-externalizer: externalized") {
			c.warn("dry-run", "The dry run warned: %s", w)
		}
	}
}

var calledWebhook = regexp.MustCompile(`failed calling webhook "([^"]+)"`)

// explain turns a failed dry run into a sentence, with the advice of the install's mode.
func explain(err error, mode installMode) string {
	msg := err.Error()
	if m := calledWebhook.FindStringSubmatch(msg); m != nil {
		name, cause := m[1], cause(msg)
		if f := classifyTLS(cause); f != tlsNone {
			return explainTLS(f, name, mode, lastPart(msg))
		}
		switch {
		case containsAny(cause, "connection refused", "no endpoints available", "no such host", "not found", "dial tcp", "connection reset", "EOF"):
			return fmt.Sprintf("The API server cannot reach webhook %s: the manager is not running or not ready, or its Service has no endpoints. (%s)", name, lastPart(msg))
		case containsAny(cause, "context deadline exceeded", "timeout", "Timeout"):
			return fmt.Sprintf("Webhook %s did not answer in time: the manager may be overloaded, or the network between the API server and it blocks the call. (%s)", name, lastPart(msg))
		}
		return fmt.Sprintf("The API server could not call webhook %s: %s", name, lastPart(msg))
	}
	switch {
	case apierrors.IsForbidden(err):
		return "You may not create ClusterObjectSets, not even as a dry run: this check needs that permission. (" + msg + ")"
	case apierrors.IsNotFound(err):
		return "The ClusterObjectSet API is not served: install its CustomResourceDefinition first."
	case strings.Contains(msg, "denied the request"):
		return "A webhook refused the test ClusterObjectSet: " + msg
	case apierrors.IsInvalid(err):
		return "The test ClusterObjectSet was refused as invalid (does the served CRD differ from this plugin's?): " + msg
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || strings.Contains(msg, "context deadline exceeded"):
		return "The server-side dry run did not finish in time: " + msg
	}
	return "The server-side dry run failed: " + msg
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// lastPart is the innermost cause of an error message (after the last ": " that follows the webhook
// call), which is what says why.
func lastPart(msg string) string {
	if i := strings.Index(msg, "failed to call webhook: "); i >= 0 {
		msg = msg[i+len("failed to call webhook: "):]
	}
	return msg
}

// cause is what follows the webhook's URL in a failed call (`Post "<url>": <cause>`), so that the URL
// (which holds "?timeout=") is not taken for the cause.
func cause(msg string) string {
	rest := lastPart(msg)
	if strings.HasPrefix(rest, `Post "`) {
		if i := strings.Index(rest, `": `); i >= 0 {
			return rest[i+3:]
		}
	}
	return rest
}

// reason is an API error's reason, for sentences.
func reason(err error) string {
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return strings.ToLower(string(r))
	}
	return err.Error()
}

// detectMode reads the install's mode (the manager's Deployment behind the webhooks' Service, the
// configurations' annotations and CA) and says it; in the cert-manager mode it checks the Certificate.
func (c *checker) detectMode(ctx context.Context, cl *clients, hooks []webhook) {
	var in installation
	for _, h := range hooks {
		if from := h.annotations[injectCAAnnotation]; from != "" && in.InjectFrom == "" {
			in.InjectFrom = from
		}
		if in.URL == "" && h.client.URL != nil {
			in.URL = *h.client.URL
			if u, err := url.Parse(in.URL); err == nil && u.Host != "" {
				in.URL = u.Scheme + "://" + u.Host
			}
		}
		if s := h.client.Service; in.Host == "" && s != nil {
			in.Host = s.Name + "." + s.Namespace + ".svc"
			if s.Port != nil && *s.Port != 443 {
				in.Host += fmt.Sprintf(":%d", *s.Port)
			}
		}
		if in.CACommonName == "" {
			if block, _ := pem.Decode(h.client.CABundle); block != nil {
				if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
					in.CACommonName = cert.Subject.CommonName
				}
			}
		}
	}
	for _, h := range hooks {
		if s := h.client.Service; s != nil {
			deploy, args, err := managerDeployment(ctx, cl, s.Namespace, s.Name)
			if err != nil {
				c.warn("mode", "Cannot read the manager's Deployment behind Service %s/%s (%s): the mode is read from the webhook configurations only.", s.Namespace, s.Name, reason(err))
			}
			in.Deployment, in.Args = deploy, args
			if deploy != "" {
				c.namespace = s.Namespace
			}
			break
		}
	}
	c.mode = detectMode(in)
	if c.mode.Cert == "" && c.mode.URL == "" {
		c.warn("mode", "%s", c.mode.describe())
	} else {
		c.ok("mode", "%s", c.mode.describe())
	}
	if c.mode.Conflict != "" {
		c.fail("mode", "%s", c.mode.Conflict)
	}
	c.callers(in)
	if c.mode.Cert == certManager {
		c.certificate(ctx, cl, c.mode.InjectFrom)
	}
}

// callers says whether the manager authenticates the callers of its webhook port, from its
// Deployment's --webhook-client-ca; nothing when the Deployment was not found.
func (c *checker) callers(in installation) {
	if in.Deployment == "" {
		return
	}
	ca := argValue(in.Args, "--webhook-client-ca")
	port := argValue(in.Args, "--webhook-port")
	if port == "" {
		port = "9443"
	}
	if ca == "" {
		c.warn("callers", "The webhook port (%s) of %s accepts unauthenticated callers: it runs without --webhook-client-ca, so anything that reaches the port can send the webhooks forged admission requests, which the manager acts on (it writes Secrets). Have the API server present a client certificate and set --webhook-client-ca (Helm: webhookClientCA.configMap; kustomize: config/components/webhook-client-ca; docs/install.md), or where the API server cannot be configured restrict the port to the control plane's addresses (networkPolicy.webhookIngressCIDRs).", port, in.Deployment)
		return
	}
	names := argValue(in.Args, "--webhook-client-names")
	if names == "" {
		names = "any name"
	}
	c.ok("callers", "The webhook port of %s serves only callers with a client certificate of --webhook-client-ca %s (%s).", in.Deployment, ca, names)
}

// managerDeployment finds the Deployment whose Pods the Service selects and returns it
// ("namespace/name") and its manager container's args; empty when there is none.
func managerDeployment(ctx context.Context, cl *clients, namespace, service string) (string, []string, error) {
	svc, err := cl.kube.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil, nil
		}
		return "", nil, err
	}
	if len(svc.Spec.Selector) == 0 {
		return "", nil, nil
	}
	list, err := cl.kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", nil, err
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	for _, d := range list.Items {
		if !selector.Matches(labels.Set(d.Spec.Template.Labels)) || len(d.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		container := d.Spec.Template.Spec.Containers[0]
		for _, ct := range d.Spec.Template.Spec.Containers {
			if ct.Name == "manager" {
				container = ct
			}
		}
		return d.Namespace + "/" + d.Name, append(slices.Clone(container.Command[min(1, len(container.Command)):]), container.Args...), nil
	}
	return "", nil, nil
}

var certificateGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// certificate checks that cert-manager's Certificate ("namespace/name") exists and is Ready.
func (c *checker) certificate(ctx context.Context, cl *clients, key string) {
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		c.fail("certificate", "The %s annotation %q is not namespace/name: cert-manager's cainjector cannot find the Certificate.", injectCAAnnotation, key)
		return
	}
	u, err := cl.dynamic.Resource(certificateGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.fail("certificate", "Certificate %s is not found: is cert-manager installed (certificates.cert-manager.io served), and the certmanager overlay's Certificate applied?", key)
		return
	case err != nil:
		c.warn("certificate", "Cannot read Certificate %s (%s).", key, reason(err))
		return
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] != "Ready" {
			continue
		}
		if m["status"] == "True" {
			notAfter, _, _ := unstructured.NestedString(u.Object, "status", "notAfter")
			c.ok("certificate", "Certificate %s is Ready (valid until %s).", key, notAfter)
		} else {
			c.fail("certificate", "Certificate %s is not Ready (%v: %v): cert-manager has not issued the serving certificate.", key, m["reason"], m["message"])
		}
		return
	}
	c.fail("certificate", "Certificate %s has no Ready condition yet: is cert-manager's controller running?", key)
}
