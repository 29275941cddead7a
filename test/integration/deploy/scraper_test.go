package deploy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestScraperReadsMetrics applies config/prometheus's scraper (its ServiceAccount, token Secret and
// binding) with the install's metrics-reader ClusterRole, and scrapes a manager as the ServiceMonitor
// does: with the token the control plane fills into the Secret, verifying the metrics certificate
// (the webhooks') with its CA.
func TestScraperReadsMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	applySystemNamespace(t)
	var scraper []*unstructured.Unstructured
	for _, u := range parse(t, render(t, "prometheus")) {
		if k := u.GetKind(); k == "ServiceAccount" || k == "Secret" || k == "ClusterRoleBinding" {
			scraper = append(scraper, u)
		}
	}
	scraper = append(scraper, find(parse(t, render(t, "default")), "ClusterRole", "cos-externalizer-metrics-reader"))
	var created []*unstructured.Unstructured // deleted at the end; what other tests left stays
	for _, u := range scraper {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(u.GroupVersionKind())
		if err := testenv.Env.Client.Get(ctx, client.ObjectKeyFromObject(u), existing); apierrors.IsNotFound(err) {
			created = append(created, u)
		}
		mustKubectl(t, mustJSON(t, u), "apply", "--server-side", "--field-manager="+fieldManager, "-f", "-")
	}
	t.Cleanup(func() {
		for _, u := range created {
			if err := testenv.Env.Client.Delete(context.Background(), u); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	})
	var token string
	framework.Eventually(ctx, t, "the control plane to fill the scraper's token in", func(ctx context.Context) (bool, string) {
		s := &corev1.Secret{}
		if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: "cos-externalizer-metrics-scraper-token"}, s); err != nil {
			return false, err.Error()
		}
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		return token != "", fmt.Sprintf("keys %d", len(s.Data))
	})

	dir, bundle := servingCertificate(t)
	webhookPort, probePort, metricsPort := freePort(t), freePort(t), freePort(t)
	runManager(t,
		"--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(webhookPort), "--webhook-cert-dir="+dir,
		"--webhook-configuration=", "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metricsPort), "--rollout=false",
	)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.CA)
	verifying := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
	}}
	url := "https://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
	framework.Eventually(ctx, t, "the scraper's token to read the metrics over verified TLS", func(ctx context.Context) (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := verifying.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte("cos_externalizer_orphaned_secrets")),
			fmt.Sprintf("%d %.200q", resp.StatusCode, b)
	})
	// The same request without the token is refused: the binding is what lets it in.
	resp, err := verifying.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %s, want 401", resp.Status)
	}
}
