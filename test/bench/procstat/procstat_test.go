package procstat

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const status = "Name:\tcat\nVmPeak:\t    3892 kB\nVmHWM:\t    2100 kB\nVmRSS:\t    1024 kB\nVmSwap:\t       0 kB\n"

// parseCase is an input of a parser, and what it returns: want, or an error that starts wantErr
// (and the zero value).
type parseCase[T any] struct {
	in      string
	want    T
	wantErr string
}

func checkParse[T any](t *testing.T, parse func(string) (T, error), cases map[string]parseCase[T]) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parse(tc.in)
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one starting %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	checkParse(t, ParseStatus, map[string]parseCase[Memory]{
		"both":            {in: status, want: Memory{RSS: 1024 * 1024, Peak: 2100 * 1024}},
		"no peak":         {in: "VmRSS:\t 1 kB\n", wantErr: "no VmRSS or no VmHWM"},
		"no rss":          {in: "VmHWM:\t 1 kB\n", wantErr: "no VmRSS or no VmHWM"},
		"a kernel thread": {in: "Name:\tkthreadd\nThreads:\t1\n", wantErr: "no VmRSS or no VmHWM"},
		"not a number":    {in: "VmRSS:\t lots kB\nVmHWM:\t 1 kB\n", wantErr: "VmRSS: "},
	})
}

func TestParseStat(t *testing.T) {
	checkParse(t, ParseStat, map[string]parseCase[float64]{
		"plain":              {in: "7 (cat) R 1 1 1 0 -1 4194304 96 0 0 0 250 50 0 0 20 0 1 0\n", want: 3},
		"a name with parens": {in: "7 (a) b) (c) S 1 1 1 0 -1 0 0 0 0 0 100 1 0 0\n", want: 1.01},
		"no command name":    {in: "7 cat R 1", wantErr: "no command name"},
		"too few fields":     {in: "7 (cat) R 1 1", wantErr: "3 fields after the command name"},
		"utime not a number": {in: "7 (cat) R 1 1 1 0 -1 0 0 0 0 0 x 1 0\n", wantErr: "utime: "},
		"stime not a number": {in: "7 (cat) R 1 1 1 0 -1 0 0 0 0 0 1 x 0\n", wantErr: "stime: "},
	})
}

// TestReadSelf reads this test's own process.
func TestReadSelf(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Peak < m.RSS {
		t.Errorf("memory %+v: want a resident set and a peak at least as large", m)
	}
	if cpu, err := ReadCPUSeconds(os.Getpid()); err != nil || cpu < 0 {
		t.Errorf("CPU seconds %v, %v", cpu, err)
	}
}

// FuzzParse: neither parser panics on any text.
func FuzzParse(f *testing.F) {
	f.Add(status)
	f.Add("7 (a) b) (c) S 1 1 1 0 -1 0 0 0 0 0 100 1 0 0\n")
	f.Add("VmRSS: kB\nVmHWM:\n")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseStatus(s)
		_, _ = ParseStat(s)
	})
}
