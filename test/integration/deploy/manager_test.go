package deploy_test

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestManagerServesProbesAndMetrics runs the manager against the real control plane and checks its
// health and readiness endpoints, and its metrics endpoint as a scraper meets it: HTTPS only with
// HTTP/1.1, refused without a token (401) and for a ServiceAccount without the right to read
// /metrics (403), served to one bound to a metrics-reader role.
func TestManagerServesProbesAndMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	probePort, metricsPort := freePort(t), freePort(t)
	runManager(t,
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metricsPort),
		"--enable-webhooks=false", // the webhook tests run the webhooks
	)

	allowed, denied := scraperToken(ctx, t, "metrics-scraper", true), scraperToken(ctx, t, "metrics-nobody", false)
	metrics := "https://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
	for _, tc := range []struct {
		url, token, want string
		code             int
	}{
		{url: "http://127.0.0.1:" + strconv.Itoa(probePort) + "/healthz", want: "ok", code: http.StatusOK},
		{url: "http://127.0.0.1:" + strconv.Itoa(probePort) + "/readyz", want: "ok", code: http.StatusOK},
		{url: metrics, code: http.StatusUnauthorized},
		{url: metrics, token: denied, code: http.StatusForbidden},
		{url: metrics, token: allowed, want: "cos_externalizer_clusterobjectsets{reason=\"Blocked\"} 0", code: http.StatusOK},
		{url: metrics, token: allowed, want: "cos_externalizer_orphaned_secrets 0", code: http.StatusOK},
		// No webhook port: nothing is open to unauthenticated callers.
		{url: metrics, token: allowed, want: "cos_externalizer_webhook_client_authentication_required 1", code: http.StatusOK},
	} {
		framework.Eventually(ctx, t, fmt.Sprintf("GET %s (token %v) to give %d with %q", tc.url, tc.token != "", tc.code, tc.want), func(ctx context.Context) (bool, string) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tc.url, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := insecureClient().Do(req)
			if err != nil {
				return false, err.Error()
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == tc.code && strings.Contains(string(b), tc.want), fmt.Sprintf("%d %.300q", resp.StatusCode, b)
		})
	}
	// HTTP/2 is not offered: a client that asks for h2 first gets HTTP/1.1.
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(metricsPort), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // the metrics server's self-signed certificate
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Errorf("the metrics server negotiated %q", p)
	}
}

// insecureClient speaks HTTPS to the metrics server's self-signed certificate.
func insecureClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback test of a self-signed server
	}}
}

// scraperToken creates a ServiceAccount in default, bound (when allow) to a role that may get
// /metrics as config/rbac's metrics-reader does, and returns a token for it.
func scraperToken(ctx context.Context, t *testing.T, name string, allow bool) string {
	t.Helper()
	c := testenv.Env.Client
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if err := c.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if allow {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}}}
		for _, o := range []client.Object{role, binding} {
			if err := c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
		}
	}
	tr, err := testenv.Env.Clientset.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// runManager runs the manager in this process with args until the test ends, then waits for it to
// return: an error, or no return within 30 s, fails the test.
func runManager(t *testing.T, args ...string) {
	t.Helper()
	var o app.Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.SkipControllerNameValidation = true // other tests, and -count, run managers in this process
	framework.Start(context.Background(), t, "the manager", func(ctx context.Context) error { return app.Run(ctx, testenv.Env.Config, &o) })
}

// servingCertificate writes a serving certificate for 127.0.0.1 into a new folder (--webhook-cert-dir).
func servingCertificate(t *testing.T) (string, *certs.Bundle) {
	t.Helper()
	dir := t.TempDir()
	bundle, err := certs.Generate([]string{"127.0.0.1"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := bundle.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir, bundle
}
