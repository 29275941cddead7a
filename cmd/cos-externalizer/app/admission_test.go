package app_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
)

// TestAdmissionFlags: Validate refuses an admission pool smaller than one ClusterObjectSet's resolved
// content, and a wait the API server's timeout would cut short.
func TestAdmissionFlags(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"defaults":                {},
		"no wait":                 {args: []string{"--admission-wait=0"}},
		"9.9 s":                   {args: []string{"--admission-wait=9.9s"}},
		"10 s: the API server's":  {args: []string{"--admission-wait=10s"}, wantErr: "--admission-wait"},
		"negative wait":           {args: []string{"--admission-wait=-1s"}, wantErr: "--admission-wait"},
		"pool of one budget":      {args: []string{"--max-concurrent-admission-bytes=67108864"}},
		"pool under one budget":   {args: []string{"--max-concurrent-admission-bytes=67108863"}, wantErr: "--max-concurrent-admission-bytes"},
		"smaller budget and pool": {args: []string{"--max-resolved-bytes=1048576", "--max-concurrent-admission-bytes=1048576", "--max-concurrent-resolved-bytes=1048576"}},
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
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
