package app_test

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

func TestMain(m *testing.M) { testenv.Run(m) }

func TestOptionsValidate(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"defaults":               {},
		"console debug":          {args: []string{"--log-format=console", "--log-level=debug"}},
		"unknown level":          {args: []string{"--log-level=loud"}, wantErr: "--log-level"},
		"unknown format":         {args: []string{"--log-format=xml"}, wantErr: "--log-format"},
		"empty system namespace": {args: []string{"--system-namespace="}, wantErr: "--system-namespace must not be empty"},
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
// health, readiness and metrics endpoints, then stops it.
func TestManagerServesProbesAndMetrics(t *testing.T) {
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
	ctx, cancel := context.WithCancel(context.Background())
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

	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:" + strconv.Itoa(probePort) + "/healthz", "ok"},
		{"http://127.0.0.1:" + strconv.Itoa(probePort) + "/readyz", "ok"},
		{"http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics", "controller_runtime_"},
	} {
		var body string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			resp, err := http.Get(tc.url) //nolint:noctx // loopback test
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == http.StatusOK && strings.Contains(body, tc.want), nil
		})
		if err != nil {
			t.Errorf("GET %s: want 200 with %q, last body %.200q", tc.url, tc.want, body)
		}
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
