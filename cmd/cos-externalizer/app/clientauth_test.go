package app_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// TestWebhookServerFlags: Validate reads --webhook-client-ca at start: a missing, empty or broken
// bundle is an error there, not a server that refuses every caller.
func TestWebhookServerFlags(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("client-ca", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca.crt": ca.PEM, "empty.crt": nil, "garbage.crt": []byte("not PEM")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	flagCases{
		"defaults":               {},
		"client CA":              {args: []string{"--webhook-client-ca=" + filepath.Join(dir, "ca.crt")}},
		"client CA and names":    {args: []string{"--webhook-client-ca=" + filepath.Join(dir, "ca.crt"), "--webhook-client-names=kube-apiserver, apiserver"}},
		"missing client CA file": {args: []string{"--webhook-client-ca=" + filepath.Join(dir, "missing.crt")}, wantErr: "--webhook-client-ca"},
		"empty client CA file":   {args: []string{"--webhook-client-ca=" + filepath.Join(dir, "empty.crt")}, wantErr: "--webhook-client-ca: no PEM certificate"},
		"garbage client CA file": {args: []string{"--webhook-client-ca=" + filepath.Join(dir, "garbage.crt")}, wantErr: "--webhook-client-ca: no PEM certificate"},
		"names without a CA":     {args: []string{"--webhook-client-names=apiserver"}, wantErr: "--webhook-client-names: needs --webhook-client-ca"},
		"read timeout":           {args: []string{"--webhook-read-timeout=5s"}},
		"read timeout 0":         {args: []string{"--webhook-read-timeout=0"}, wantErr: "--webhook-read-timeout"},
		"max request bytes 0":    {args: []string{"--webhook-max-request-bytes=0"}, wantErr: "--webhook-max-request-bytes"},
	}.run(t)
}
