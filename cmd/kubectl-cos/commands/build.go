package commands

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/cli-runtime/pkg/resource"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/plugin/bundle"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/plugin/phasesort"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

type buildOptions struct {
	*root
	name        string
	revision    int64
	protection  string
	deadline    int32
	probes      []string
	labels      map[string]string
	annotations map[string]string
	version     string
	files       resource.FilenameOptions
	createNS    bool
	mode        string
	threshold   int
	printFlags  *genericclioptions.PrintFlags
}

func (r *root) buildCommand() *cobra.Command {
	o := &buildOptions{root: r, printFlags: genericclioptions.NewPrintFlags("").WithDefaultOutput("yaml")}
	cmd := &cobra.Command{
		Use:   "build DIR|FILE... --name NAME --revision N [--namespace NS]",
		Short: "Turn plain manifests into an inline ClusterObjectSet",
		Long: `Turn a folder of manifests (its .yaml, .yml and .json files, in name order) or multi-document YAML
files into an inline ClusterObjectSet, printed on stdout.

The objects are sorted into the phase order producers use (namespaces, policies, identity,
configuration, storage, crds, roles, bindings, infrastructure, deploy, scaling, publish, admission;
unknown kinds go to deploy), keeping their order within a phase; a phase of more than 50 objects is
split (deploy, deploy-2, ...). Namespaced objects without a namespace get --namespace; whether a kind
is namespaced is known for built-in kinds and read from the CustomResourceDefinitions among the
objects. The result is validated as the API server validates it before it is printed; bad input is
refused with its file, line, document number and field.

Progression probes (--progression-probe, repeatable) are ` + bundle.ProbeSyntax,
		Example: `  kubectl cos build ./manifests --name my-operator-3 --revision 3 -n my-operator > cos.yaml
  kubectl cos build install.yaml --name argocd-1 --revision 1 -n argocd \
      --progression-probe 'kind=apps/Deployment;condition=Available=True'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 && !hasFiles(o.files) {
				return errors.New("give the manifests: folders or files as arguments, -f or -k")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error { return o.run(args) },
	}
	cmd.Flags().StringVar(&o.name, "name", "", "The name of the ClusterObjectSet (required).")
	cmd.Flags().Int64Var(&o.revision, "revision", 0, "spec.revision: the revision's number among those of the same owner, from 1 (required).")
	cmd.Flags().StringVar(&o.protection, "collision-protection", string(olmv1.CollisionProtectionPrevent), "spec.collisionProtection: Prevent, IfNoController or None.")
	cmd.Flags().Int32Var(&o.deadline, "progress-deadline-minutes", 0, "spec.progressDeadlineMinutes (10-720); 0 leaves it unset.")
	cmd.Flags().StringArrayVar(&o.probes, "progression-probe", nil, `A progression probe (repeatable): a selector (kind=GROUP/KIND or selector=LABELS) and assertions (condition=TYPE=True|False, fields=PATH==PATH, value=PATH=VALUE) separated by ";", or JSON.`)
	cmd.Flags().StringToStringVar(&o.labels, "labels", nil, "Labels of the ClusterObjectSet, e.g. olm.operatorframework.io/owner-name=my-operator.")
	cmd.Flags().StringToStringVar(&o.annotations, "annotations", nil, "Annotations of the ClusterObjectSet.")
	cmd.Flags().StringVar(&o.version, "bundle-version", "", "The version of the bundle, set as the annotation "+olmv1.AnnotationBundleVersion+
		" (as OLM sets it): the reconciler's Progressing message names it (\"Revision 1.2.3 has rolled out.\").")
	addFilenameFlags(cmd, &o.files, "of manifests (as the arguments)")
	cmd.Flags().StringVar(&o.mode, "externalize", "", "Print the object-data Secrets and the ClusterObjectSet of refs the webhook would store, as it would with its --externalize at this value: always (the value of a bare --externalize), oversized or never; nothing is written. Empty: the inline ClusterObjectSet.")
	cmd.Flags().Lookup("externalize").NoOptDefVal = string(admission.ModeAlways)
	cmd.Flags().IntVar(&o.threshold, "externalize-threshold", admission.DefaultThreshold, "With --externalize=oversized: the serialized spec size above which objects are externalized (the webhook's --externalize-threshold).")
	cmd.Flags().BoolVar(&o.createNS, "create-namespace", false, "Add a Namespace object (in the namespaces phase, before the rest) for each namespace the objects are in that none of them creates.")
	o.printFlags.AddFlags(cmd)
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("revision")
	return cmd
}

func (o *buildOptions) run(paths []string) error {
	printer, err := o.printFlags.ToPrinter()
	if err != nil {
		return err
	}
	var mode admission.Mode
	if o.mode != "" {
		if mode, err = admission.ParseMode(o.mode); err != nil {
			return fmt.Errorf("--externalize: %w", err)
		}
	}
	opts, errs := o.bundleOptions()
	files := o.files
	files.Filenames = append(slices.Clone(paths), files.Filenames...)
	inputs, err := o.readFiles(files)
	if err != nil {
		return err
	}
	objs, err := parseAll(inputs)
	var parseErrs bundle.Errors
	if errors.As(err, &parseErrs) {
		errs = append(parseErrs, errs...)
	} else if err != nil {
		return err
	}
	if len(errs) > 0 {
		return errs
	}
	cos, err := bundle.Build(objs, opts)
	if err != nil {
		return err
	}
	if missing := missingNamespaces(cos); len(missing) > 0 {
		if o.createNS {
			if cos, err = bundle.Build(append(objs, namespaceObjects(missing)...), opts); err != nil {
				return err
			}
		} else {
			for _, m := range missing {
				notef(o.ErrOut, "Warning: namespace %s is not among the objects: unless it exists before the rollout, the objects in it fail with NotFound: %s (--create-namespace adds it)\n", m.Name, listObjects(m.Objects, 5))
			}
		}
	}
	if mode == "" {
		u, err := toUnstructured(cos)
		if err != nil {
			return err
		}
		return printer.PrintObj(u, o.Out)
	}
	return o.printExternalized(printer, cos, mode)
}

// bundleOptions are the ClusterObjectSet's fields from the flags; errs are those of the probes.
func (o *buildOptions) bundleOptions() (opts bundle.Options, errs bundle.Errors) {
	opts = bundle.Options{
		Name: o.name, Revision: o.revision, CollisionProtection: olmv1.CollisionProtection(o.protection),
		ProgressDeadlineMinutes: o.deadline, Labels: o.labels, Annotations: o.annotations,
	}
	if o.version != "" {
		if v, ok := o.annotations[olmv1.AnnotationBundleVersion]; ok && v != o.version {
			errs = append(errs, fmt.Errorf("--bundle-version %q and --annotations %s=%q disagree: give one", o.version, olmv1.AnnotationBundleVersion, v))
		}
		opts.Annotations = maps.Clone(o.annotations)
		if opts.Annotations == nil {
			opts.Annotations = map[string]string{}
		}
		opts.Annotations[olmv1.AnnotationBundleVersion] = o.version
	}
	// The namespace is the --namespace flag as given: build is offline, and its output must not depend
	// on the kubeconfig's current context.
	if o.flags.Namespace != nil {
		opts.Namespace = *o.flags.Namespace
	}
	for i, p := range o.probes {
		probe, err := bundle.ParseProbe(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("--progression-probe[%d]: %w", i, err))
			continue
		}
		opts.Probes = append(opts.Probes, probe)
	}
	return opts, errs
}

// printExternalized prints the object-data Secrets and the ClusterObjectSet of refs the webhook
// would store for cos under mode (--externalize).
func (o *buildOptions) printExternalized(printer printers.ResourcePrinter, cos *olmv1.ClusterObjectSet, mode admission.Mode) error {
	rendered, note, err := externalizeOffline(cos, mode, o.threshold, o.systemNamespace)
	if err != nil {
		return err
	}
	notef(o.ErrOut, "kubectl-cos: %s\n", note)
	if *o.printFlags.OutputFormat == "json" {
		// As kubectl prints several objects: a List.
		items := make([]any, len(rendered))
		for i, u := range rendered {
			items[i] = u.Object
		}
		return printer.PrintObj(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "List", "items": items}}, o.Out)
	}
	for _, u := range rendered {
		if err := printer.PrintObj(u, o.Out); err != nil {
			return err
		}
	}
	return nil
}

// preexisting are the namespaces every cluster has.
var preexisting = map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}

// missingNamespace is a namespace objects are in that none of the objects creates.
type missingNamespace struct {
	Name string
	// Objects are "Kind name" of the objects in it, in phase order.
	Objects []string
}

// missingNamespaces lists, in the order first used, the namespaces the inline objects of c are in
// that no Namespace object of c creates, other than those every cluster has.
func missingNamespaces(c *olmv1.ClusterObjectSet) []missingNamespace {
	created := map[string]bool{}
	for _, ph := range c.Spec.Phases {
		for _, m := range ph.Objects {
			if gvk := m.Object.GroupVersionKind(); gvk.Group == "" && gvk.Kind == "Namespace" {
				created[m.Object.GetName()] = true
			}
		}
	}
	var out []missingNamespace
	index := map[string]int{}
	for _, ph := range c.Spec.Phases {
		for _, m := range ph.Objects {
			ns := m.Object.GetNamespace()
			if ns == "" || created[ns] || preexisting[ns] || phasesort.IsClusterScoped(m.Object.GroupVersionKind().GroupKind()) {
				continue
			}
			i, ok := index[ns]
			if !ok {
				i = len(out)
				index[ns] = i
				out = append(out, missingNamespace{Name: ns})
			}
			out[i].Objects = append(out[i].Objects, m.Object.GetKind()+" "+m.Object.GetName())
		}
	}
	return out
}

// namespaceObjects are Namespace objects for the missing namespaces.
func namespaceObjects(missing []missingNamespace) []bundle.Object {
	out := make([]bundle.Object, len(missing))
	for i, m := range missing {
		out[i] = bundle.Object{Source: bundle.Source{File: "--create-namespace", Document: i + 1, Item: -1}, Object: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": m.Name},
		}}}
	}
	return out
}

// listObjects lists at most n objects, then how many more.
func listObjects(objs []string, n int) string {
	if len(objs) <= n {
		return strings.Join(objs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(objs[:n], ", "), len(objs)-n)
}
