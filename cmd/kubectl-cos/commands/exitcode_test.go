package commands

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestExitCode runs commands offline as Main does and checks their exit status: diff's errors are 2
// (1 is "differences found", as kubectl diff's), the other commands' 1.
func TestExitCode(t *testing.T) {
	tests := map[string]struct {
		args []string
		want int
		// says is in what is written to stderr.
		says string
	}{
		"diff, an unknown flag":  {args: []string{"diff", "--no-such-flag"}, want: 2, says: "unknown flag: --no-such-flag"},
		"diff, a file not there": {args: []string{"diff", "-f", "/no/such/file.yaml"}, want: 2, says: "/no/such/file.yaml"},
		"diff, wrong arguments":  {args: []string{"diff", "only-one"}, want: 2, says: "give two ClusterObjectSet names, or -f FILE"},
		"build, an unknown flag": {args: []string{"build", "--no-such-flag"}, want: 1, says: "unknown flag: --no-such-flag"},
		"size, a file not there": {args: []string{"size", "-f", "/no/such/file.yaml"}, want: 1, says: "/no/such/file.yaml"},
		"an unknown command":     {args: []string{"nosuchcommand"}, want: 1, says: `unknown command "nosuchcommand"`},
		"version":                {args: []string{"version"}, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			cmd.SetArgs(tc.args)
			ran, err := cmd.ExecuteC()
			got := exitCode(&errOut, ran, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("exit status (-want +got):\n%s\nstderr: %s", diff, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.says) {
				t.Errorf("stderr %q does not say %q", errOut.String(), tc.says)
			}
		})
	}
	// An ExitError is its code, with no message of its own.
	var errOut bytes.Buffer
	if got := exitCode(&errOut, nil, &ExitError{Code: 1}); got != 1 || errOut.Len() != 0 {
		t.Errorf("ExitError{1}: status %d, stderr %q; want 1 and nothing", got, errOut.String())
	}
}
