package app_test

import (
	"context"
	"crypto/tls"
	"flag"
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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

func TestMain(m *testing.M) { testenv.Run(m) }

func TestOptionsValidate(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"defaults":                      {},
		"console debug":                 {args: []string{"--log-format=console", "--log-level=debug"}},
		"unknown level":                 {args: []string{"--log-level=loud"}, wantErr: "--log-level"},
		"unknown format":                {args: []string{"--log-format=xml"}, wantErr: "--log-format"},
		"empty system namespace":        {args: []string{"--system-namespace="}, wantErr: "--system-namespace must not be empty"},
		"rollout auto":                  {args: []string{"--rollout=auto"}},
		"rollout false":                 {args: []string{"--rollout=false"}},
		"rollout maybe":                 {args: []string{"--rollout=maybe"}, wantErr: "--rollout"},
		"resolved bytes zero":           {args: []string{"--max-resolved-bytes=0"}, wantErr: "--max-resolved-bytes"},
		"cert from a Secret":            {args: []string{"--webhook-cert-source=secret"}},
		"self-signed":                   {args: []string{"--webhook-cert-source=self-signed", "--self-signed-ca-lifetime=30s", "--self-signed-cert-lifetime=5s"}},
		"unknown cert source":           {args: []string{"--webhook-cert-source=vault"}, wantErr: "--webhook-cert-source"},
		"self-signed, no configuration": {args: []string{"--webhook-cert-source=self-signed", "--webhook-configuration="}, wantErr: "--webhook-configuration"},
		"self-signed, CA too short":     {args: []string{"--webhook-cert-source=self-signed", "--self-signed-ca-lifetime=1s"}, wantErr: "--self-signed-ca-lifetime"},
		"self-signed, no hosts":         {args: []string{"--webhook-cert-source=self-signed", "--webhook-service=", "--webhook-cert-hosts="}, wantErr: "--webhook-cert-hosts"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var o app.Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.Bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestManagerServesProbesAndMetrics runs the manager against the real control plane and checks its
// health and readiness endpoints, and its metrics endpoint as a scraper meets it: HTTPS only with
// HTTP/1.1, refused without a token (401) and for a ServiceAccount without the right to read
// /metrics (403), served to one bound to a metrics-reader role.
func TestManagerServesProbesAndMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var o app.Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.Bind(fs)
	probePort, metricsPort := freePort(t), freePort(t)
	if err := fs.Parse([]string{
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probePort),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
		"--enable-webhooks=false", // the webhook tests run the webhooks
	}); err != nil {
		t.Fatal(err)
	}
	o.SkipControllerNameValidation = true // -count runs the manager again in this process
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, testenv.Env.Config, &o) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop")
		}
	}()

	allowed, denied := scraperToken(t, ctx, "metrics-scraper", true), scraperToken(t, ctx, "metrics-nobody", false)
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
	} {
		var body string
		var code int
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tc.url, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := insecureClient().Do(req)
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body, code = string(b), resp.StatusCode
			return code == tc.code && strings.Contains(body, tc.want), nil
		})
		if err != nil {
			t.Errorf("GET %s (token %v): want %d with %q, last %d %.300q", tc.url, tc.token != "", tc.code, tc.want, code, body)
		}
	}
	// HTTP/2 is not offered: a client that asks for h2 first gets HTTP/1.1.
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(metricsPort), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // the metrics server's self-signed certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
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
func scraperToken(t *testing.T, ctx context.Context, name string, allow bool) string {
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

// TestRolloutAuto: --rollout=auto rolls out unless the cluster serves OLM's ClusterExtension API.
func TestRolloutAuto(t *testing.T) {
	ctx := context.Background()
	rollOut, why, err := app.DecideRollout(testenv.Env.Config, app.RolloutAuto)
	if err != nil || !rollOut {
		t.Fatalf("without OLM: rollout %v (%s), %v", rollOut, why, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "clusterextensions.olm.operatorframework.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "olm.operatorframework.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusterextensions", Singular: "clusterextension", Kind: "ClusterExtension", ListKind: "ClusterExtensionList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := testenv.Env.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Gone from discovery before the next test (or run) asks again.
		if err := testenv.Env.Client.Delete(ctx, crd); err != nil {
			t.Error(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			rollOut, _, err := app.DecideRollout(testenv.Env.Config, app.RolloutAuto)
			return err == nil && rollOut, nil
		}); err != nil {
			t.Errorf("waiting for the ClusterExtension API to go: %v", err)
		}
	}()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		rollOut, why, err = app.DecideRollout(testenv.Env.Config, app.RolloutAuto)
		return err == nil && !rollOut, nil
	})
	if err != nil || !strings.Contains(why, "ClusterExtension") {
		t.Fatalf("with OLM's ClusterExtension API served: rollout %v (%s), %v", rollOut, why, err)
	}
	if rollOut, _, _ := app.DecideRollout(testenv.Env.Config, "true"); !rollOut {
		t.Error("--rollout=true did not roll out beside OLM")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
