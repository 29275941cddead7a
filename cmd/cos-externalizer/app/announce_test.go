package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/zapr"
	dto "github.com/prometheus/client_model/go"

	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// TestAnnounceClientAuthentication: without --webhook-client-ca the manager says at start, at warn
// level, that its webhook port accepts unauthenticated callers, and sets
// cos_externalizer_webhook_client_authentication_required to 0; with it, or without webhooks, the
// gauge is 1 and nothing warns.
func TestAnnounceClientAuthentication(t *testing.T) {
	tests := map[string]struct {
		clientCA  string
		serving   bool
		wantGauge float64
		wantLevel string // of the one line logged; empty: none
	}{
		"no client CA":         {serving: true, wantGauge: 0, wantLevel: "warn"},
		"client CA":            {clientCA: "/ca.crt", serving: true, wantGauge: 1, wantLevel: "info"},
		"no webhooks served":   {serving: false, wantGauge: 1},
		"client CA, no server": {clientCA: "/ca.crt", serving: false, wantGauge: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			var lo loggingOptions
			zl, err := lo.newLogger(&buf)
			if err != nil {
				t.Fatal(err)
			}
			m := webhook.NewMetrics().Server
			m.ClientAuthRequired.Set(-1)
			o := webhookServerOptions{clientCA: tc.clientCA}
			o.announce(zapr.NewLogger(zl).WithName("setup"), tc.serving, m)
			g := &dto.Metric{}
			if err := m.ClientAuthRequired.Write(g); err != nil {
				t.Fatal(err)
			}
			if got := g.GetGauge().GetValue(); got != tc.wantGauge {
				t.Errorf("gauge %v, want %v", got, tc.wantGauge)
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if tc.wantLevel == "" {
				if buf.Len() != 0 {
					t.Errorf("logged %q, want nothing", buf.String())
				}
				return
			}
			if len(lines) != 1 {
				t.Fatalf("logged %d lines, want 1: %q", len(lines), buf.String())
			}
			var e struct{ Level, Msg, Logger string }
			if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
				t.Fatal(err)
			}
			if e.Level != tc.wantLevel || e.Logger != "setup" {
				t.Errorf("level %q logger %q, want %q setup: %s", e.Level, e.Logger, tc.wantLevel, lines[0])
			}
			if tc.wantLevel == "warn" && !strings.Contains(e.Msg, "accepts unauthenticated callers") {
				t.Errorf("message %q does not say the port is open", e.Msg)
			}
		})
	}
}
