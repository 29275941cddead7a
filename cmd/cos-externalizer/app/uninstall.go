package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/uninstall"
)

// UninstallCommand is the manager's subcommand that uninstalls it and keeps every workload (package
// internal/kube/uninstall); the Helm chart's pre-delete hook runs it with the manager's image.
const UninstallCommand = "uninstall"

// usageError is a bad command line (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// UninstallMain is the process of `cos-externalizer uninstall args...`: with the kubeconfig of the
// environment (in a pod: its service account), until a signal, it uninstalls and returns the exit
// status. It sets controller-runtime's logger, which its client logs through, before its first use
// (unset, controller-runtime prints a stack trace after 30 s, while uninstall waits for the pods).
func UninstallMain(args []string) int {
	ctrl.SetLogger(klog.NewKlogr())
	err := Uninstall(ctrl.SetupSignalHandler(), ctrl.GetConfig, args, os.Stdout, os.Stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "cos-externalizer uninstall:", err)
		return 2
	default:
		fmt.Fprintln(os.Stderr, "cos-externalizer uninstall:", err)
		return 1
	}
}

// Uninstall parses args, checks them, and only then loads the config and uninstalls, reporting each
// step to out.
func Uninstall(ctx context.Context, config func() (*rest.Config, error), args []string, out, errOut io.Writer) error {
	var o uninstall.Options
	fs := flag.NewFlagSet("cos-externalizer "+UninstallCommand, flag.ContinueOnError)
	fs.SetOutput(errOut)
	o.Bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("no arguments expected, got %q", fs.Args())}
	}
	if err := o.Validate(); err != nil {
		return usageError{err}
	}
	cfg, err := config()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	_, err = uninstall.Run(ctx, c, o, out)
	return err
}
