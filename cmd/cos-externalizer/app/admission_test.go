package app_test

import (
	"testing"
)

// TestAdmissionFlags: Validate refuses an admission pool smaller than one ClusterObjectSet's resolved
// content, and a wait or a deadline margin the API server's timeout would cut short.
func TestAdmissionFlags(t *testing.T) {
	flagCases{
		"defaults":                 {},
		"no wait":                  {args: []string{"--admission-wait=0"}},
		"9.9 s":                    {args: []string{"--admission-wait=9.9s"}},
		"10 s: the API server's":   {args: []string{"--admission-wait=10s"}, wantErr: "--admission-wait"},
		"negative wait":            {args: []string{"--admission-wait=-1s"}, wantErr: "--admission-wait"},
		"pool of one budget":       {args: []string{"--max-concurrent-admission-bytes=67108864"}},
		"pool under one budget":    {args: []string{"--max-concurrent-admission-bytes=67108863"}, wantErr: "--max-concurrent-admission-bytes"},
		"no deadline bound":        {args: []string{"--admission-deadline-margin=0"}},
		"deadline margin 9.9 s":    {args: []string{"--admission-deadline-margin=9.9s"}},
		"deadline margin 10 s":     {args: []string{"--admission-deadline-margin=10s"}, wantErr: "--admission-deadline-margin"},
		"negative deadline margin": {args: []string{"--admission-deadline-margin=-1s"}, wantErr: "--admission-deadline-margin"},
		"smaller budget and pool":  {args: []string{"--max-resolved-bytes=1048576", "--max-concurrent-admission-bytes=1048576", "--max-concurrent-resolved-bytes=1048576"}},
	}.run(t)
}
