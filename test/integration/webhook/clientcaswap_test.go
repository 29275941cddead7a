package webhook_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// TestClientCASwapReachesPooledConnections: the API server keeps its connections to the webhooks
// alive. Once the manager's --webhook-client-ca file holds another CA than the one of the API
// server's client certificate, the next admission request, over a kept-alive connection, is
// refused (counted with reason client_certificate) and its connection closed, and new handshakes
// fail: a server-side dry run of an inline ClusterObjectSet is refused (the webhooks fail closed).
// With the CA back, dry runs go through again.
func TestClientCASwapReachesPooledConnections(t *testing.T) {
	if testenv.Env.WebhookClientCA == "" {
		t.Skip("the API server presents no webhook client certificate (an existing cluster)")
	}
	ctx := context.Background()
	good, err := os.ReadFile(testenv.Env.WebhookClientCA)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("another-webhook-client-ca", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	write := func(data []byte) {
		t.Helper()
		// A new file renamed into place, as the kubelet swaps a ConfigMap volume.
		if err := os.WriteFile(caFile+".new", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(caFile+".new", caFile); err != nil {
			t.Fatal(err)
		}
	}
	write(good)
	withManager(t, "--webhook-client-ca="+caFile)

	dryRun := func(ctx context.Context) error {
		cos := builders.COS("clientca-swap", builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
			builders.WithPhase("configuration", builders.InlineConfigMaps("default", "clientca-swap", 1)...))
		return testenv.Env.Client.Create(ctx, cos, client.DryRunAll)
	}
	refusals := func() float64 {
		t.Helper()
		text, err := testenv.ScrapeMetrics(ctx, manager.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		n, err := testenv.SumMetric(strings.NewReader(text), "cos_externalizer_admission_refusals_total", `reason="`+string(admission.ReasonClientCertificate)+`"`)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Two requests in a row: the API server keeps the connection of the first for the second.
	for i := range 2 {
		if err := dryRun(ctx); err != nil {
			t.Fatalf("dry run %d with the API server's CA: %v", i, err)
		}
	}
	before := refusals()

	write(other.PEM)
	if err := dryRun(ctx); err == nil {
		t.Fatal("a dry run went through after the CA was swapped away")
	} else {
		t.Logf("after the swap: %v", err)
	}
	// (Other calls, the Secret guard's, may have kept connections of their own: at least one.)
	if got := refusals(); got < before+1 {
		t.Errorf("refusals with reason %s: %v, want at least %v: the request over the kept-alive connection was not refused by the manager", string(admission.ReasonClientCertificate), got, before+1)
	}
	if err := dryRun(ctx); err == nil {
		t.Error("a dry run went through on a new connection with the CA swapped away")
	}

	write(good)
	framework.Eventually(ctx, t, "dry runs going through with the CA back", func(ctx context.Context) (bool, string) {
		err := dryRun(ctx)
		return err == nil, fmt.Sprint(err)
	})
}
