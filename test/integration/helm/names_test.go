package helm_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// TestFullnameOverride: with fullnameOverride (acme) every object of every mode (with monitoring and the
// uninstall hook) is named by it, and every reference follows: binding subjects and roleRefs,
// resourceNames, selectors, the webhooks' Service and CA injection, the Certificate's Secret, DNS
// names and Issuer, the ServiceMonitor's Secrets and server name, the hook's and the manager's
// flags. What the manager names itself (its Lease) and webhook names are not object names. The
// schema and the templates refuse a prefix the Services cannot carry.
// With nameOverride (acme), the names are the release's and it, and the name label is it.
func TestFullnameOverride(t *testing.T) {
	for name, o := range map[string]struct{ set, prefix, label string }{
		"fullnameOverride": {"fullnameOverride=acme", "acme", release},
		"nameOverride":     {"nameOverride=acme", release + "-acme", "acme"},
	} {
		for mode, m := range modes {
			t.Run(name+"/"+mode, func(t *testing.T) { checkNames(t, append(slices.Clone(m.set), o.set), o.prefix, o.label, mode) })
		}
	}
	t.Run("refused", func(t *testing.T) {
		for _, set := range [][]string{
			{"fullnameOverride=" + strings.Repeat("a", 56)},
			{"fullnameOverride=Acme"},
			{"fullnameOverride=1acme"},
			{"nameOverride=" + strings.Repeat("a", 50)}, // the release's name and it: over 55
		} {
			args := []string{"template", release, chartDir(t), "-n", namespace}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			if out, err := helm(t, args...); err == nil {
				t.Errorf("--set %s: rendered, want refused", set)
			} else if !strings.Contains(out, "schema") && !strings.Contains(out, "55 characters") {
				t.Errorf("--set %s: %v, want a schema error or the template's:\n%s", set, err, out)
			}
		}
	})
}

// checkNames renders the chart with set (and monitoring) and checks that every object is named
// prefix or prefix-..., its name label is label, and every reference follows.
func checkNames(t *testing.T, set []string, prefix, label, mode string) {
	t.Helper()
	objs := helmTemplate(t, append(set, "metrics.serviceMonitor.enabled=true")...)
	names := map[string]map[string]bool{}
	for _, o := range objs {
		if names[o.GetKind()] == nil {
			names[o.GetKind()] = map[string]bool{}
		}
		names[o.GetKind()][o.GetName()] = true
		if o.GetKind() != "CustomResourceDefinition" && o.GetName() != prefix && !strings.HasPrefix(o.GetName(), prefix+"-") {
			t.Errorf("%s %s: not named %s or %s-...", o.GetKind(), o.GetName(), prefix, prefix)
		}
	}
	refer := func(from *unstructured.Unstructured, what, kind, name string) {
		t.Helper()
		if !names[kind][name] {
			t.Errorf("%s %s: %s names %s %q, which the chart does not render", from.GetKind(), from.GetName(), what, kind, name)
		}
	}
	deploy := find(objs, "Deployment", prefix)
	if deploy == nil {
		t.Fatalf("no Deployment %s", prefix)
	}
	pod := labels.Set(stringMap(at(deploy.Object, []string{"spec", "template", "metadata", "labels"})))
	if pod["app.kubernetes.io/name"] != label {
		t.Errorf("the manager's pods: app.kubernetes.io/name %q, want %q", pod["app.kubernetes.io/name"], label)
	}
	flags := map[string]string{}
	for _, a := range stringSlice(at(deploy.Object, []string{"spec", "template", "spec", "containers", "0", "args"})) {
		k, v, _ := strings.Cut(a, "=")
		flags[k] = v // the last of a flag given twice wins
	}
	refer(deploy, "serviceAccountName", "ServiceAccount", at(deploy.Object, []string{"spec", "template", "spec", "serviceAccountName"}).(string))
	refer(deploy, "--webhook-configuration", "MutatingWebhookConfiguration", flags["--webhook-configuration"])
	refer(deploy, "--webhook-configuration", "ValidatingWebhookConfiguration", flags["--webhook-configuration"])
	refer(deploy, "--webhook-service", "Service", flags["--webhook-service"])
	certSecret := flags["--webhook-cert-secret"]
	if want := map[bool]string{true: prefix + "-webhook-ca", false: prefix + "-webhook-cert"}[mode == "self-signed"]; certSecret != want {
		t.Errorf("--webhook-cert-secret=%q, want %q", certSecret, want)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "RoleBinding", "ClusterRoleBinding":
			refer(o, "roleRef", at(o.Object, []string{"roleRef", "kind"}).(string), at(o.Object, []string{"roleRef", "name"}).(string))
			for _, s := range o.Object["subjects"].([]any) {
				refer(o, "a subject", "ServiceAccount", s.(map[string]any)["name"].(string))
			}
		case "Role", "ClusterRole":
			for _, r := range sliceAt(o.Object, "rules") {
				r := r.(map[string]any)
				for _, res := range stringSlice(r["resources"]) {
					kind := map[string]string{"mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
						"validatingwebhookconfigurations": "ValidatingWebhookConfiguration", "deployments": "Deployment"}[res]
					for _, n := range stringSlice(r["resourceNames"]) {
						if kind != "" && (kind != "Deployment" || strings.HasPrefix(n, prefix)) {
							refer(o, "resourceNames", kind, n)
						}
					}
				}
			}
		case "Service", "PodDisruptionBudget", "NetworkPolicy":
			sel := stringMap(at(o.Object, []string{"spec", "selector"}))
			if o.GetKind() != "Service" {
				sel = stringMap(at(o.Object, []string{"spec", map[string]string{"PodDisruptionBudget": "selector", "NetworkPolicy": "podSelector"}[o.GetKind()], "matchLabels"}))
			}
			if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(pod) {
				t.Errorf("%s %s: selector %v does not select the manager's pods %v", o.GetKind(), o.GetName(), sel, pod)
			}
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			for _, h := range sliceAt(o.Object, "webhooks") {
				refer(o, "clientConfig", "Service", at(h, []string{"clientConfig", "service", "name"}).(string))
			}
			if ref, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
				refer(o, "inject-ca-from", "Certificate", strings.TrimPrefix(ref, namespace+"/"))
			}
		case "Certificate":
			refer(o, "issuerRef", at(o.Object, []string{"spec", "issuerRef", "kind"}).(string), at(o.Object, []string{"spec", "issuerRef", "name"}).(string))
			if dns := stringSlice(at(o.Object, []string{"spec", "dnsNames"})); dns != nil {
				if want := flags["--webhook-service"] + "." + namespace + ".svc"; dns[0] != want {
					t.Errorf("Certificate %s: dnsNames %q, want %s first", o.GetName(), dns, want)
				}
				if s := at(o.Object, []string{"spec", "secretName"}); s != certSecret {
					t.Errorf("Certificate %s: secretName %v, the manager reads %s", o.GetName(), s, certSecret)
				}
			}
		case "ServiceMonitor":
			e := []string{"spec", "endpoints", "0"}
			refer(o, "the token", "Secret", at(o.Object, append(e, "authorization", "credentials", "name")).(string))
			if ca := at(o.Object, append(e, "tlsConfig", "ca", "secret", "name")); ca != certSecret {
				t.Errorf("ServiceMonitor: CA from Secret %v, the manager's is %s", ca, certSecret)
			}
			if sn := at(o.Object, append(e, "tlsConfig", "serverName")); sn != flags["--webhook-service"]+"."+namespace+".svc" {
				t.Errorf("ServiceMonitor: serverName %v", sn)
			}
			sel := labels.SelectorFromSet(stringMap(at(o.Object, []string{"spec", "selector", "matchLabels"})))
			if svc := find(objs, "Service", prefix+"-metrics"); svc == nil || !sel.Matches(labels.Set(svc.GetLabels())) {
				t.Errorf("ServiceMonitor: selector %v does not select Service %s-metrics", sel, prefix)
			}
		case "Job":
			for _, a := range stringSlice(at(o.Object, []string{"spec", "template", "spec", "containers", "0", "args"})) {
				k, v, _ := strings.Cut(a, "=")
				if kind := map[string]string{"--deployment": "Deployment", "--mutating-webhook": "MutatingWebhookConfiguration",
					"--validating-webhook": "ValidatingWebhookConfiguration"}[k]; kind != "" {
					refer(o, k, kind, v)
				}
			}
			refer(o, "serviceAccountName", "ServiceAccount", at(o.Object, []string{"spec", "template", "spec", "serviceAccountName"}).(string))
		}
	}
}

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := map[string]string{}
	for k, e := range m {
		out[k], _ = e.(string)
	}
	return out
}

func stringSlice(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

func sliceAt(obj map[string]any, key string) []any {
	l, _ := obj[key].([]any)
	return l
}
