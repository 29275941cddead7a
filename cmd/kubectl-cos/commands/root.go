// Package commands is the kubectl cos plugin: build, apply, inspect, diff, size and check
// ClusterObjectSets from the command line. Its commands stay thin: they read (files, the cluster),
// call the pure core (cmd/kubectl-cos/plugin/bundle, internal/content, webhook/admission, webhook/admission/validation,
// internal/secretdata, cmd/kubectl-cos/plugin/sizes, cmd/kubectl-cos/plugin/cosdiff, cmd/kubectl-cos/plugin/inspect) and write through
// objectdata, the Secret writer
// the webhook uses too, so that the plugin stores exactly what the webhook would.
package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/plugin/bundle"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
)

// Version is the plugin's version, set at build time (make plugin).
var Version = "dev"

// Hooks let tests act between the steps of apply, in the process, where a crash would leave the
// cluster: AfterSecrets runs once the Secrets are written and before the ClusterObjectSet is sent; an
// error from it stops apply there, as a killed process would.
type Hooks struct {
	AfterSecrets func(ctx context.Context, cosName string) error
}

// ExitError ends the plugin with Code and no message of its own (diff: 1 means differences).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// cosGVR is the ClusterObjectSet resource.
var cosGVR = olmv1.GroupVersion.WithResource("clusterobjectsets")

// root holds what every subcommand shares.
type root struct {
	genericiooptions.IOStreams
	flags           *genericclioptions.ConfigFlags
	systemNamespace string
	hooks           Hooks
}

// NewCommand returns the kubectl cos command.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return NewCommandWithHooks(streams, Hooks{})
}

// NewCommandWithHooks is NewCommand with hooks for tests.
func NewCommandWithHooks(streams genericiooptions.IOStreams, hooks Hooks) *cobra.Command {
	r := &root{IOStreams: streams, flags: genericclioptions.NewConfigFlags(true), hooks: hooks}
	cmd := &cobra.Command{
		Use:   "kubectl-cos",
		Short: "Build, apply, inspect, diff, size and check ClusterObjectSets",
		Long: `kubectl cos works with ClusterObjectSets (olm.operatorframework.io/v1) and their object-data Secrets.

It builds a ClusterObjectSet from plain manifests, applies one of any size by externalizing its objects
on the client exactly as the cos-externalizer webhook would (the only way past the API server's 3 MiB
request limit, and faster below it), shows what a stored one holds, compares revisions, sizes a file
against the platform's limits, and checks that the webhook is reachable.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl cos"},
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	r.flags.AddFlags(cmd.PersistentFlags())
	// -v is klog's verbosity, as in kubectl; cobra then gives --version no shorthand.
	addKlogFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&r.systemNamespace, "system-namespace", olmv1.DefaultSystemNamespace,
		"The namespace of the object-data Secrets: the manager's --system-namespace, and what an empty ref.namespace means.")
	cmd.AddCommand(r.buildCommand(), r.applyCommand(), r.inspectCommand(), r.diffCommand(), r.sizeCommand(), r.checkCommand(), r.uninstallCommand(), r.versionCommand())
	return cmd
}

// clients are the cluster clients of one command.
type clients struct {
	config *rest.Config
	// client reads and writes typed objects (the Secret writer takes it).
	client client.Client
	// dynamic writes ClusterObjectSets as they are given (unstructured).
	dynamic dynamic.Interface
	kube    kubernetes.Interface
}

// clients makes the clients, with API warnings written to stderr as kubectl writes them.
func (r *root) clients() (*clients, error) {
	cfg, err := r.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "kubectl-cos/" + Version
	cfg.WarningHandler = rest.NewWarningWriter(r.ErrOut, rest.WarningWriterOptions{Deduplicate: true})
	c, err := client.New(cfg, client.Options{Scheme: scheme.New(), Mapper: restMapper()})
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{config: cfg, client: c, dynamic: dyn, kube: kube}, nil
}

// restMapper maps the few kinds the plugin reads and writes without asking the API server's
// discovery, which would cost a round trip per group on every run.
func restMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope apimeta.RESTScope
	}{
		{corev1.SchemeGroupVersion.WithKind("Secret"), apimeta.RESTScopeNamespace},
		{corev1.SchemeGroupVersion.WithKind("Event"), apimeta.RESTScopeNamespace},
		{corev1.SchemeGroupVersion.WithKind("Service"), apimeta.RESTScopeNamespace},
		{eventsv1.SchemeGroupVersion.WithKind("Event"), apimeta.RESTScopeNamespace},
		{olmv1.GroupVersion.WithKind(olmv1.ClusterObjectSetKind), apimeta.RESTScopeRoot},
		{apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"), apimeta.RESTScopeRoot},
		{admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"), apimeta.RESTScopeRoot},
		{admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"), apimeta.RESTScopeRoot},
	} {
		m.Add(k.gvk, k.scope)
	}
	return m
}

// input is one file or folder given on the command line, read.
type input struct {
	name string
	data []byte
}

// parseAll parses every input, reporting every problem of every file together.
func parseAll(inputs []input) ([]bundle.Object, error) {
	var objs []bundle.Object
	var errs bundle.Errors
	for _, in := range inputs {
		o, err := bundle.Parse(in.name, in.data)
		objs = append(objs, o...)
		var es bundle.Errors
		switch {
		case errors.As(err, &es):
			errs = append(errs, es...)
		case err != nil:
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return objs, errs
	}
	return objs, nil
}

// clusterObjectSets reads the ClusterObjectSets of a file (every document must be one).
func (r *root) clusterObjectSets(files resource.FilenameOptions) ([]bundle.Object, error) {
	if !hasFiles(files) {
		return nil, errors.New("-f or -k is required: the file of the ClusterObjectSet (- for standard input)")
	}
	inputs, err := r.readFiles(files)
	if err != nil {
		return nil, err
	}
	objs, err := parseAll(inputs)
	if err != nil {
		return nil, err
	}
	var errs bundle.Errors
	for _, o := range objs {
		if gvk := o.Object.GroupVersionKind(); gvk.GroupKind() != (schema.GroupKind{Group: olmv1.GroupVersion.Group, Kind: olmv1.ClusterObjectSetKind}) {
			errs = append(errs, &bundle.Error{Source: o.Source, Object: o.Object.GetKind() + " " + o.Object.GetName(), Field: "kind",
				Detail: fmt.Sprintf("Unsupported value: want a ClusterObjectSet (%s), got %s", olmv1.GroupVersion.String(), gvk.GroupKind())})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if len(objs) == 0 {
		return nil, bundle.ErrNoObjects
	}
	return objs, nil
}

// toUnstructured is obj as a client sends it: without status, managedFields and the zero
// creationTimestamp a Go struct serializes.
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtimeToMap(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
		delete(md, "managedFields")
		if len(md) == 0 {
			delete(m, "metadata")
		}
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// runtimeToMap is obj's JSON as a map, integers as int64 (as unstructured.Unstructured has them).
func runtimeToMap(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// errorExitCodeAnnotation, on a command, is the exit status of its errors when 1 means something
// else (diff: 1 is "differences found", errors are 2, as kubectl diff's).
const errorExitCodeAnnotation = "cos-externalizer.io/error-exit-code"

// Main runs kubectl cos with args (without the program name) on the process's standard streams and
// returns its exit status.
func Main(args []string) int {
	// controller-runtime's client logs through its own logger: klog's, as kubectl's, set before its
	// first use (unset, controller-runtime prints a stack trace after 30 s that reads like a panic).
	ctrllog.SetLogger(klog.NewKlogr())
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := NewCommand(streams)
	cmd.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ran, err := cmd.ExecuteContextC(ctx)
	return exitCode(streams.ErrOut, ran, err)
}

// exitCode is the exit status of a command that ran (or failed to parse its flags) and returned
// err, whose message it writes: 0 without an error, an ExitError's code, else 1, or the command's
// errorExitCodeAnnotation.
func exitCode(errOut io.Writer, ran *cobra.Command, err error) int {
	var exit *ExitError
	switch {
	case errors.As(err, &exit):
		return exit.Code
	case err != nil:
		notef(errOut, "error: %s\n", err)
		if ran != nil {
			if code, convErr := strconv.Atoi(ran.Annotations[errorExitCodeAnnotation]); convErr == nil {
				return code
			}
		}
		return 1
	}
	return 0
}

// notef writes a note (progress, a summary, the final error) to standard error. A note that cannot be
// written has nowhere left to be reported, so its write error is dropped, as kubectl drops it; what a
// command prints to standard output, its result, fails the command when it cannot be written.
func notef(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format, args...)
}
