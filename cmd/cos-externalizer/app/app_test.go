package app_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
)

// The tests that run the manager against an API server are in test/integration/deploy
// (manager_test.go).

func TestOptionsValidate(t *testing.T) {
	flagCases{
		"defaults":                      {},
		"console debug":                 {args: []string{"--log-format=console", "--log-level=debug"}},
		"empty system namespace":        {args: []string{"--system-namespace="}, wantErr: "--system-namespace must not be empty"},
		"rollout auto":                  {args: []string{"--rollout=auto"}},
		"rollout false":                 {args: []string{"--rollout=false"}},
		"rollout maybe":                 {args: []string{"--rollout=maybe"}, wantErr: "--rollout"},
		"no drain":                      {args: []string{"--shutdown-drain-period=0"}},
		"negative drain":                {args: []string{"--shutdown-drain-period=-1s"}, wantErr: "--shutdown-drain-period"},
		"resolved bytes zero":           {args: []string{"--max-resolved-bytes=0"}, wantErr: "--max-resolved-bytes"},
		"short lease":                   {args: []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}},
		"lease not above renew":         {args: []string{"--leader-elect-lease-duration=10s"}, wantErr: "--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)"},
		"renew within a retry":          {args: []string{"--leader-elect-renew-deadline=2s"}, wantErr: "--leader-elect-renew-deadline (2s) must be greater than 1.2 x --leader-elect-retry-period (2s)"},
		"retry under a second":          {args: []string{"--leader-elect-retry-period=500ms"}, wantErr: "--leader-elect-retry-period: must be at least 1s, got 500ms"},
		"cert from a Secret":            {args: []string{"--webhook-cert-source=secret"}},
		"self-signed":                   {args: []string{"--webhook-cert-source=self-signed", "--self-signed-ca-lifetime=30s", "--self-signed-cert-lifetime=5s"}},
		"unknown cert source":           {args: []string{"--webhook-cert-source=vault"}, wantErr: "--webhook-cert-source"},
		"self-signed, no configuration": {args: []string{"--webhook-cert-source=self-signed", "--webhook-configuration="}, wantErr: "--webhook-configuration"},
		"self-signed, CA too short":     {args: []string{"--webhook-cert-source=self-signed", "--self-signed-ca-lifetime=1s"}, wantErr: "--self-signed-ca-lifetime"},
		"self-signed, no hosts":         {args: []string{"--webhook-cert-source=self-signed", "--webhook-service=", "--webhook-cert-hosts="}, wantErr: "--webhook-cert-hosts"},
	}.run(t)
}

// flagCases are cases of Validate: the flags, and what the error it returns contains ("": none).
type flagCases map[string]struct {
	args    []string
	wantErr string
}

// run binds fresh Options for every case, parses its args and checks Validate's error.
func (cases flagCases) run(t *testing.T) {
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var o app.Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.Bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			wantedErr(t, o.Validate(), tc.wantErr)
		})
	}
}

// wantedErr fails the test unless err contains wantErr, or is nil when wantErr is empty; it reports
// whether an error was wanted (the case ends there).
func wantedErr(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Fatalf("error %v, want one containing %q", err, wantErr)
	}
	return wantErr != ""
}
