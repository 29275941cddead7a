package plugin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestCheck: kubectl cos check passes with the manager running, says in a sentence that the API
// server does not trust the webhook when its CA bundle is another CA's, that the manager refused the
// API server's client certificate when its --webhook-client-ca is another CA's, and that it cannot
// reach the webhook when the manager is down; nothing is written by its dry run.
func TestCheck(t *testing.T) {
	before := allObjectDataSecrets(t)
	r := plugin(t, "check")
	if r.err != nil {
		t.Fatalf("check with the manager running: %v\n%s", r.err, r.stdout)
	}
	for _, s := range []string{
		"[ok]   The ClusterObjectSet API (olm.operatorframework.io/v1) is served.",
		"[ok]   The CA of webhook externalize.cos-externalizer.io (MutatingWebhookConfiguration cos-externalizer) is injected (cos-externalizer-webhook-ca, valid until ",
		"[ok]   The CA of webhook validate.cos-externalizer.io (ValidatingWebhookConfiguration cos-externalizer) is injected",
		"[ok]   A server-side dry run of an inline ClusterObjectSet came back externalized: the API server trusts and reaches the webhooks (nothing was written).",
	} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("check lacks %q:\n%s", s, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "[FAIL]") {
		t.Errorf("check failed something:\n%s", r.stdout)
	}

	t.Run("CA bundle of another CA", func(t *testing.T) {
		other, err := certs.Generate([]string{"127.0.0.1"}, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c().Get(ctx, client.ObjectKey{Name: "cos-externalizer"}, cfg); err != nil {
			t.Fatal(err)
		}
		original := cfg.DeepCopy()
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = other.CA
		}
		if err := c().Update(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			restored := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := c().Get(ctx, client.ObjectKey{Name: "cos-externalizer"}, restored); err != nil {
				t.Error(err)
				return
			}
			restored.Webhooks = original.Webhooks
			if err := c().Update(ctx, restored); err != nil {
				t.Errorf("restoring the webhook configuration: %v", err)
			}
		})
		var out string
		// The API server reads webhook configurations from its informer: wait for it to use the new CA.
		framework.Eventually(ctx, t, "check to see the new CA", func(ctx context.Context) (bool, string) {
			r := plugin(t, "check")
			out = r.stdout
			return exitCode(r.err) == 1 && strings.Contains(out, "[FAIL] The API server does not trust the serving certificate of webhook externalize.cos-externalizer.io"), out
		})
		if !strings.Contains(out, "the CA bundle in its configuration is not the CA that signed the manager's certificate") {
			t.Errorf("check output:\n%s", out)
		}
	})

	// The API server presents its client certificate (the local control plane's); the manager's
	// --webhook-client-ca file then holds another CA (swapped in as the kubelet swaps a ConfigMap's),
	// so it refuses that certificate: the manager's refusal, not an untrusted serving CA.
	t.Run("client certificate of another CA", func(t *testing.T) {
		if testenv.Env.WebhookClientCA == "" {
			t.Skip("the API server presents no webhook client certificate (an existing cluster)")
		}
		good, err := os.ReadFile(testenv.Env.WebhookClientCA)
		if err != nil {
			t.Fatal(err)
		}
		other, err := certs.NewCA("another-webhook-client-ca", time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "ca.crt")
		write := func(data []byte) {
			t.Helper()
			if err := os.WriteFile(file+".new", data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(file+".new", file); err != nil {
				t.Fatal(err)
			}
		}
		write(good)
		if err := manager.Stop(); err != nil {
			t.Fatal(err)
		}
		restartManagerAfter(t)
		m, err := testenv.Env.StartManager(ctx, "--webhook-client-ca="+file)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := m.Stop(); err != nil {
				t.Error(err)
			}
		})
		write(other.PEM)
		var out string
		// The manager reads the file again at its next handshake or poll; a kept-alive connection
		// is refused with a 403 first, then new handshakes fail.
		framework.Eventually(ctx, t, "check to name the refused client certificate", func(ctx context.Context) (bool, string) {
			r := plugin(t, "check")
			out = r.stdout
			return exitCode(r.err) == 1 && strings.Contains(out, "[FAIL] Webhook externalize.cos-externalizer.io refused the client certificate the API server presented: no CA of the manager's --webhook-client-ca bundle signed it."), out
		})
		if strings.Contains(out, "does not trust the serving certificate") {
			t.Errorf("check blames the serving CA:\n%s", out)
		}
	})

	t.Run("manager down", func(t *testing.T) {
		if err := manager.Stop(); err != nil {
			t.Fatal(err)
		}
		restartManagerAfter(t)
		r := plugin(t, "check")
		if exitCode(r.err) != 1 || !strings.Contains(r.stdout, "[FAIL] The API server cannot reach webhook externalize.cos-externalizer.io: the manager is not running or not ready") {
			t.Errorf("check with the manager down: %v\n%s", r.err, r.stdout)
		}
	})

	for name := range allObjectDataSecrets(t) {
		if !before[name] && strings.HasPrefix(name, "kubectl-cos-check-") {
			t.Errorf("check wrote Secret %s", name)
		}
	}
}

// allObjectDataSecrets lists the object-data Secrets of the system namespace by name.
func allObjectDataSecrets(t *testing.T) map[string]bool {
	t.Helper()
	list := &corev1.SecretList{}
	if err := c().List(ctx, list, client.InNamespace(testenv.SystemNamespace), client.HasLabels{olmv1.LabelRevisionName}); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range list.Items {
		out[s.Name] = true
	}
	return out
}
