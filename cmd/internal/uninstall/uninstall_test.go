package uninstall

import (
	"flag"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"defaults":          {},
		"empty namespace":   {args: []string{"--namespace="}, want: "--namespace: must not be empty"},
		"empty deployment":  {args: []string{"--deployment="}, want: "--deployment: must not be empty"},
		"empty mutating":    {args: []string{"--mutating-webhook="}, want: "--mutating-webhook: must not be empty"},
		"empty validating":  {args: []string{"--validating-webhook="}, want: "--validating-webhook: must not be empty"},
		"no timeout":        {args: []string{"--timeout=0s"}, want: "--timeout: must be positive, got 0s"},
		"names and dry run": {args: []string{"--namespace=ns", "--deployment=d", "--dry-run", "--timeout=1m"}},
	} {
		t.Run(name, func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("uninstall", flag.ContinueOnError)
			o.Bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got := ""
			if err := o.Validate(); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
	var o Options
	o.Bind(flag.NewFlagSet("uninstall", flag.ContinueOnError))
	want := Options{Namespace: "olmv1-system", Deployment: "cos-externalizer", MutatingWebhook: "cos-externalizer",
		ValidatingWebhook: "cos-externalizer", Timeout: 5 * time.Minute}
	if o != want {
		t.Errorf("defaults %+v, want %+v (the names config/ installs)", o, want)
	}
}
