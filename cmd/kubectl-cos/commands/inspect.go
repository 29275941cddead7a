package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/plugin/inspect"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

type inspectOptions struct {
	*root
	resolve    secretdata.ResolveMemory
	events     int
	printFlags *genericclioptions.PrintFlags
}

func (r *root) inspectCommand() *cobra.Command {
	o := &inspectOptions{root: r, printFlags: genericclioptions.NewPrintFlags("")}
	cmd := &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show what a stored ClusterObjectSet holds and how its rollout is going",
		Long: `Show a ClusterObjectSet on one screen:

  its revision, state, conditions and the phase being rolled out;
  per phase, each object's kind, namespace and name (refs resolved), and whether the phase's latched
  digest still matches its content;
  per ref, its Secret and key: whether the Secret exists, is immutable, of the object-data type and
  owned by this ClusterObjectSet, whether the key's digest verifies, and the object's inline and
  stored bytes;
  its recent Events;
  the orphaned Secrets of that name: object-data Secrets labelled for it that it does not reference.

Each part is shown even when another cannot be read. No object or Secret content is shown, except
with -o yaml or -o json, which print the fully resolved inline form of the ClusterObjectSet.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeNames,
		RunE:              func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), args[0]) },
	}
	cmd.Flags().Int64Var(&o.resolve.MaxResolvedBytes, "max-resolved-bytes", content.DefaultMaxResolvedBytes, "The most content decoded to resolve refs.")
	cmd.Flags().IntVar(&o.events, "events", 10, "How many of the latest Events to show.")
	o.printFlags.AddFlags(cmd)
	return cmd
}

func (o *inspectOptions) run(ctx context.Context, name string) error {
	cl, err := o.clients()
	if err != nil {
		return err
	}
	if o.printFlags.OutputFormat != nil && *o.printFlags.OutputFormat != "" {
		return o.printResolved(ctx, cl, name)
	}
	in := inspect.Input{Name: name, SystemNamespace: o.systemNamespace, Now: time.Now(), Resolve: o.resolve, MaxEvents: o.events,
		Secrets: map[string]inspect.SecretRead{}}
	cos := &olmv1.ClusterObjectSet{}
	if err := cl.client.Get(ctx, client.ObjectKey{Name: name}, cos); err != nil {
		in.COSErr = err
	} else {
		in.COS = cos
		for _, key := range cos.ReferencedSecrets(o.systemNamespace) {
			sec := &corev1.Secret{}
			if err := cl.client.Get(ctx, key, sec); err != nil {
				in.Secrets[key.String()] = inspect.SecretRead{Err: err}
			} else {
				in.Secrets[key.String()] = inspect.SecretRead{Secret: sec}
			}
		}
	}
	in.Events, in.EventsErr = events(ctx, cl, name)
	labelled := &corev1.SecretList{}
	if err := cl.client.List(ctx, labelled, client.InNamespace(o.systemNamespace),
		client.MatchingLabels{olmv1.LabelRevisionName: naming.RevisionLabelValue(name)}); err != nil {
		in.LabelledErr = err
	} else {
		in.Labelled = labelled.Items
	}
	report := inspect.Build(in)
	if err := inspect.Render(o.Out, report); err != nil {
		return err
	}
	if in.COS != nil && in.COS.DeletionTimestamp.IsZero() && refused(in.COS) {
		i, causes, err := o.causes(ctx, cl, in.COS)
		if i >= 0 {
			if err := renderCauses(o.Out, in.COS.Spec.Phases[i].Name, len(in.COS.Spec.Phases[i].Objects), causes, err); err != nil {
				return err
			}
		}
	}
	if in.COSErr != nil {
		return &ExitError{Code: 1}
	}
	return nil
}

// events lists the Events about the ClusterObjectSet (cluster-scoped objects' Events are in the
// default namespace; all namespaces are searched).
func events(ctx context.Context, cl *clients, name string) ([]inspect.Event, error) {
	sel := fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.kind", olmv1.ClusterObjectSetKind),
		fields.OneTermEqualSelector("involvedObject.name", name),
	).String()
	list, err := cl.kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	var out []inspect.Event
	for _, e := range list.Items {
		if e.InvolvedObject.APIVersion != "" && e.InvolvedObject.APIVersion != olmv1.GroupVersion.String() {
			continue
		}
		t := e.LastTimestamp.Time
		switch {
		case e.Series != nil && !e.Series.LastObservedTime.IsZero():
			t = e.Series.LastObservedTime.Time
		case t.IsZero() && !e.EventTime.IsZero():
			t = e.EventTime.Time
		case t.IsZero():
			t = e.CreationTimestamp.Time
		}
		count := e.Count
		if e.Series != nil && e.Series.Count > count {
			count = e.Series.Count
		}
		out = append(out, inspect.Event{Time: t, Type: e.Type, Reason: e.Reason, Message: e.Message, Count: count})
	}
	return out, nil
}

// printResolved prints the ClusterObjectSet with every ref replaced by the object it resolves to.
func (o *inspectOptions) printResolved(ctx context.Context, cl *clients, name string) error {
	printer, err := o.printFlags.ToPrinter()
	if err != nil {
		return err
	}
	cos, err := resolvedCOS(ctx, cl, name, o.systemNamespace, o.resolve)
	if err != nil {
		return err
	}
	u, err := toUnstructuredKeepStatus(cos)
	if err != nil {
		return err
	}
	return printer.PrintObj(u, o.Out)
}

// resolvedCOS reads a ClusterObjectSet and resolves its refs (admission.Inline, through the
// webhook's resolver: content keys verified, a budget of decoded bytes).
func resolvedCOS(ctx context.Context, cl *clients, name, systemNamespace string, memory secretdata.ResolveMemory) (*olmv1.ClusterObjectSet, error) {
	cos := &olmv1.ClusterObjectSet{}
	if err := cl.client.Get(ctx, client.ObjectKey{Name: name}, cos); err != nil {
		return nil, err
	}
	phases, err := admission.Inline(cos.Spec.Phases, objectdata.Resolver(ctx, cl.client, systemNamespace, memory))
	if err != nil {
		return nil, fmt.Errorf("resolving ClusterObjectSet %s: %w", name, err)
	}
	cos.Spec.Phases = phases
	cos.APIVersion, cos.Kind = olmv1.GroupVersion.String(), olmv1.ClusterObjectSetKind
	return cos, nil
}

// completeNames completes ClusterObjectSet names.
func (r *root) completeNames(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cl, err := r.clients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	list := &olmv1.ClusterObjectSetList{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cl.client.List(ctx, list); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, len(list.Items))
	for i, c := range list.Items {
		names[i] = c.Name
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// toUnstructuredKeepStatus is obj as unstructured, with its status, without managedFields.
func toUnstructuredKeepStatus(obj *olmv1.ClusterObjectSet) (*unstructured.Unstructured, error) {
	m, err := runtimeToMap(obj)
	if err != nil {
		return nil, err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	return &unstructured.Unstructured{Object: m}, nil
}
