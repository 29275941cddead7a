package helm_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// The ConfigMap config/components/webhook-client-ca mounts.
const clientCAConfigMap = "cos-externalizer-webhook-client-ca"

// TestWebhookClientCA: the chart's webhookClientCA renders what the kustomize components
// config/components/webhook-client-ca and webhook-client-ca-kubeadm render over each overlay; its
// key and names land in the manager's flags; the schema refuses names without a ConfigMap and what
// is not a ConfigMap's name or key.
func TestWebhookClientCA(t *testing.T) {
	for _, c := range []struct {
		component string
		set       []string
	}{
		{"webhook-client-ca", []string{"webhookClientCA.configMap=" + clientCAConfigMap}},
		{"webhook-client-ca-kubeadm", []string{"webhookClientCA.configMap=" + clientCAConfigMap, "webhookClientCA.names={front-proxy-client}"}},
	} {
		for overlay, m := range modes {
			t.Run(c.component+"/"+overlay, func(t *testing.T) {
				want := kustomizeWithComponent(t, testenv.RepoPath(t, "config", overlay), testenv.RepoPath(t, "config", "components", c.component))
				if !strings.Contains(mustJSON(t, find(want, "Deployment", "cos-externalizer").Object), "--webhook-client-ca=") {
					t.Fatal("the component did not set --webhook-client-ca")
				}
				compare(t, helmTemplate(t, slices.Concat(overlayValues, m.set, c.set)...), want)
			})
		}
	}

	t.Run("key and names", func(t *testing.T) {
		objs := helmTemplate(t, "webhookClientCA.configMap=apiserver-ca", "webhookClientCA.key=bundle.pem", "webhookClientCA.names={kube-apiserver,front-proxy-client}")
		deploy := find(objs, "Deployment", "cos-externalizer")
		args := at(deploy.Object, []string{"spec", "template", "spec", "containers", "0", "args"}).([]any)
		for _, want := range []string{"--webhook-client-ca=/etc/cos-externalizer/webhook-client-ca/bundle.pem", "--webhook-client-names=kube-apiserver,front-proxy-client"} {
			if !slices.Contains(args, any(want)) {
				t.Errorf("no %s in the manager's args %v", want, args)
			}
		}
		volume := at(deploy.Object, []string{"spec", "template", "spec", "volumes", "-1"})
		if diff := cmp.Diff(map[string]any{"name": "webhook-client-ca", "configMap": map[string]any{"name": "apiserver-ca"}}, volume); diff != "" {
			t.Errorf("the volume (-want +got):\n%s", diff)
		}
	})

	t.Run("unset", func(t *testing.T) {
		b := mustJSON(t, find(helmTemplate(t), "Deployment", "cos-externalizer").Object)
		if strings.Contains(b, "webhook-client") {
			t.Errorf("without a ConfigMap the manager has client authentication: %s", b)
		}
	})

	t.Run("schema", func(t *testing.T) {
		for _, set := range [][]string{
			{"webhookClientCA.names={apiserver}"},
			{"webhookClientCA.configMap=Not_A_Name"},
			{"webhookClientCA.configMap=ca", "webhookClientCA.key=a/b"},
			{"webhookClientCA.configMap=ca", "webhookClientCA.key="},
			{"webhookClientCA.configMap=ca", "webhookClientCA.names={a b}"},
			{"webhookClientCA.other=1"},
		} {
			args := []string{"template", release, chartDir(t), "-n", namespace}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			if out, err := helm(t, args...); err == nil {
				t.Errorf("--set %v: rendered, want refused by the schema", set)
			} else if !strings.Contains(out, "schema") {
				t.Errorf("--set %v: %v, want a schema error:\n%s", set, err, out)
			}
		}
	})
}

// TestNotesWarnUnauthenticated: the chart's notes warn, after an install, that the webhook port
// accepts unauthenticated callers unless webhookClientCA is set.
func TestNotesWarnUnauthenticated(t *testing.T) {
	for name, tc := range map[string]struct {
		set  []string
		warn bool
	}{
		"default":   {warn: true},
		"client CA": {set: []string{"webhookClientCA.configMap=" + clientCAConfigMap}},
	} {
		t.Run(name, func(t *testing.T) {
			// helm install renders the notes (helm template does not); a dry run needs the cluster
			// only to read it, and knows only the kinds it serves: the self-signed mode renders no
			// cert-manager objects, whose CRDs this cluster may not have, and the CRD is there
			// already, not the release's (the notes' warning is the same in every mode).
			args := []string{"install", "notes-test", chartDir(t), "-n", "notes-test", "--dry-run=client", "--set", "mode=self-signed", "--set", "crds.enabled=false"}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := helmEnv(t, []string{"KUBECONFIG=" + testenv.Env.Kubeconfig}, args...)
			if err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			_, notes, ok := strings.Cut(out, "NOTES:")
			if !ok {
				t.Fatalf("no notes in:\n%s", out)
			}
			if got := strings.Contains(notes, "accepts unauthenticated callers"); got != tc.warn {
				t.Errorf("the notes warn %v, want %v:\n%s", got, tc.warn, notes)
			}
			if !tc.warn && !strings.Contains(notes, clientCAConfigMap) {
				t.Errorf("the notes do not name the client CA's ConfigMap:\n%s", notes)
			}
		})
	}
}
