package app_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
)

func TestMemoryLimit(t *testing.T) {
	tests := map[string]struct {
		goMemLimit, containerLimit string
		ratio                      float64
		want                       int64
		wantErr                    string
	}{
		"90% of 1 GiB":         {containerLimit: "1073741824", ratio: 0.9, want: 966367641},
		"all of it":            {containerLimit: "1073741824", ratio: 1, want: 1073741824},
		"rounded down":         {containerLimit: "3", ratio: 0.5, want: 1},
		"spaces":               {containerLimit: " 1000\n", ratio: 0.9, want: 900},
		"GOMEMLIMIT wins":      {goMemLimit: "500MiB", containerLimit: "1073741824", ratio: 0.9},
		"no limit":             {ratio: 0.9},
		"GOMEMLIMIT, no limit": {goMemLimit: "off", ratio: 0.9},
		"quantity, not bytes":  {containerLimit: "1Gi", ratio: 0.9, wantErr: "not a number of bytes"},
		"zero":                 {containerLimit: "0", ratio: 0.9, wantErr: "must be positive"},
		"negative":             {containerLimit: "-5", ratio: 0.9, wantErr: "must be positive"},
		"ratio zero":           {containerLimit: "1000", ratio: 0, wantErr: "--memory-limit-ratio"},
		"ratio above one":      {containerLimit: "1000", ratio: 1.1, wantErr: "--memory-limit-ratio"},
		"largest limit, half":  {containerLimit: "9223372036854775807", ratio: 0.5, want: 4611686018427387904},
		"largest limit, all":   {containerLimit: "9223372036854775807", ratio: 1, want: 9223372036854775807},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := app.MemoryLimit(tc.goMemLimit, tc.containerLimit, tc.ratio)
			if wantedErr(t, err, tc.wantErr) {
				return
			}
			if got != tc.want {
				t.Errorf("MemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

// FuzzMemoryLimit: a limit is never negative nor above the container's, and is 0 when GOMEMLIMIT is set.
func FuzzMemoryLimit(f *testing.F) {
	f.Add("", "1073741824", 0.9)
	f.Add("", "1", 1.0)
	f.Fuzz(func(t *testing.T, goMemLimit, containerLimit string, ratio float64) {
		got, err := app.MemoryLimit(goMemLimit, containerLimit, ratio)
		if err != nil {
			return
		}
		if n, _ := strconv.ParseInt(strings.TrimSpace(containerLimit), 10, 64); got < 0 || got > n {
			t.Fatalf("limit %d of %q", got, containerLimit)
		}
		if got > 0 && (goMemLimit != "" || ratio > 1) {
			t.Fatalf("limit %d with GOMEMLIMIT %q, ratio %v", got, goMemLimit, ratio)
		}
	})
}
