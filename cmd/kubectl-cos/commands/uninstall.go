package commands

import (
	goflag "flag"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/uninstall"
)

func (r *root) uninstallCommand() *cobra.Command {
	var o uninstall.Options
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Uninstall cos-externalizer and keep every workload",
		Long: `Uninstall cos-externalizer without a checkout, and keep everything it rolled out, in this order:

  the webhook configurations are deleted (they fail closed: without a manager they refuse writes);
  the manager's Deployment is deleted, and uninstall waits until its pods are gone;
  cos-externalizer's teardown finalizer is released from every ClusterObjectSet, without teardown;
  a ClusterObjectSet already being deleted is first switched to orphan deletion, so that its objects
  stay. A finalizer of the same name that another controller (OLM's) owns is left to it.

The ClusterObjectSets, the objects they installed, their object-data Secrets, the CRD and the namespace
stay. Delete the rest of the install (RBAC, Services, certificates) with the tool that installed it.
Running it again does nothing more. It works with the manager already gone and with the namespace
being deleted: it is the break-glass step that stops the webhooks' refusals.

It finds the install itself: the namespace of the Service the webhook configurations call, else of the
one manager Deployment found in any namespace. -n (or --system-namespace) names it instead, and
uninstall refuses, before it changes anything, when that is not the install the webhook
configurations call, or when a manager of another install runs (it would put the finalizers back);
the refusal says how to go on. --dry-run says what it would do and changes nothing.`,
		Example: `  kubectl cos uninstall --dry-run
  kubectl cos uninstall
  kubectl cos uninstall -n cos-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Given (-n, or --system-namespace), the namespace is checked against the install found;
			// else it is found.
			o.Namespace = ""
			if ns := cmd.Flags().Lookup("system-namespace"); ns != nil && ns.Changed {
				o.Namespace = r.systemNamespace
			}
			if ns := cmd.Flags().Lookup("namespace"); ns != nil && ns.Changed {
				o.Namespace = ns.Value.String()
			}
			cl, err := r.clients()
			if err != nil {
				return err
			}
			c, err := client.New(cl.config, client.Options{Scheme: scheme.New(), Mapper: uninstallMapper()})
			if err != nil {
				return err
			}
			_, err = uninstall.Run(cmd.Context(), c, o, r.Out)
			return err
		},
	}
	gfs := goflag.NewFlagSet("uninstall", goflag.ContinueOnError)
	o.Bind(gfs)
	gfs.VisitAll(func(f *goflag.Flag) {
		if f.Name != "namespace" { // -n, the plugin's own
			cmd.Flags().AddGoFlag(f)
		}
	})
	return cmd
}

// uninstallMapper is the plugin's mapper with the kinds uninstall deletes and waits for.
func uninstallMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper(nil)
	m.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), apimeta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), apimeta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), apimeta.RESTScopeRoot)
	return apimeta.MultiRESTMapper{restMapper(), m}
}
