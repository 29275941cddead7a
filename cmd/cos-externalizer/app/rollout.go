package app

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/internal/finalizerowner"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/internal/olmlayout"
)

// RolloutAuto is the default of --rollout: roll out unless OLM does.
const RolloutAuto = "auto"

const (
	clusterExtensionCRD = "clusterextensions.olm.operatorframework.io"
	clusterObjectSetCRD = "clusterobjectsets.olm.operatorframework.io"
)

// The reads of --rollout=auto, each of one named object besides the ClusterObjectSets' metadata:
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=clusterextensions.olm.operatorframework.io,verbs=get
// +kubebuilder:rbac:groups=apps,resources=deployments,resourceNames=operator-controller-controller-manager;object-controller-controller-manager,verbs=get,namespace=olmv1-system

// ObserveOLM reads what olmlayout.Decide decides on. A Forbidden or NotFound read is an observation
// (unknown, absent); discovery failing is an error.
func ObserveOLM(ctx context.Context, cfg *rest.Config) (olmlayout.Observations, error) {
	var o olmlayout.Observations
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return o, err
	}
	resources, err := dc.ServerResourcesForGroupVersion(olmv1.GroupVersion.String())
	if err != nil && !apierrors.IsNotFound(err) {
		return o, fmt.Errorf("--rollout=auto: asking the API server whether OLM is installed: %w", err)
	}
	if resources != nil {
		o.ClusterExtensionServed = slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Kind == "ClusterExtension" })
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return o, err
	}
	r := olmReader{c: c, o: &o}
	for _, read := range []func(context.Context) error{r.featureSet, r.clusterObjectSetCRD, r.gate, r.objectController, r.foreignFinalizers} {
		if err := read(ctx); err != nil {
			return o, err
		}
	}
	return o, nil
}

// olmReader makes the reads of ObserveOLM after discovery, each into o.
type olmReader struct {
	c client.Client
	o *olmlayout.Observations
}

// unreadable notes a Forbidden read of what as an observation; another error is returned.
func (r olmReader) unreadable(what string, err error) error {
	if apierrors.IsForbidden(err) {
		r.o.Unreadable = append(r.o.Unreadable, what+" (forbidden)")
		return nil
	}
	return fmt.Errorf("--rollout=auto: reading %s: %w", what, err)
}

// featureSet reads the generator annotation of OLM's ClusterExtension CRD, where it is served.
func (r olmReader) featureSet(ctx context.Context) error {
	if !r.o.ClusterExtensionServed {
		return nil
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.c.Get(ctx, client.ObjectKey{Name: clusterExtensionCRD}, crd); err == nil {
		r.o.FeatureSet = crd.Annotations[olmlayout.GeneratorAnnotation]
	} else if !apierrors.IsNotFound(err) {
		return r.unreadable("CRD "+clusterExtensionCRD, err)
	}
	return nil
}

// clusterObjectSetCRD reads whose ClusterObjectSet CRD is installed, if any.
func (r olmReader) clusterObjectSetCRD(ctx context.Context) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	switch err := r.c.Get(ctx, client.ObjectKey{Name: clusterObjectSetCRD}, crd); {
	case err == nil:
		r.o.ClusterObjectSetCRD = olmlayout.CRDOriginOf(crd.Annotations)
	case apierrors.IsNotFound(err):
		r.o.ClusterObjectSetCRD = olmlayout.CRDAbsent
	default:
		return r.unreadable("CRD "+clusterObjectSetCRD, err)
	}
	return nil
}

// gate reads the BoxcutterRuntime gate from the arguments of OLM's operator-controller.
func (r olmReader) gate(ctx context.Context) error {
	deploy := &appsv1.Deployment{}
	switch err := r.c.Get(ctx, client.ObjectKey{Namespace: olmlayout.Namespace, Name: olmlayout.OperatorControllerDeployment}, deploy); {
	case err == nil:
		r.o.Gate = olmlayout.DeploymentGate(deploy, olmlayout.BoxcutterRuntimeGate)
	case apierrors.IsNotFound(err):
	default:
		return r.unreadable("Deployment "+olmlayout.Namespace+"/"+olmlayout.OperatorControllerDeployment, err)
	}
	return nil
}

// objectController reads whether OLM's object-controller Deployment exists (its newer layout).
func (r olmReader) objectController(ctx context.Context) error {
	deploy := &metav1.PartialObjectMetadata{}
	deploy.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	switch err := r.c.Get(ctx, client.ObjectKey{Namespace: olmlayout.Namespace, Name: olmlayout.ObjectControllerDeployment}, deploy); {
	case err == nil:
		r.o.ObjectController = olmlayout.Present
	case apierrors.IsNotFound(err):
		r.o.ObjectController = olmlayout.Absent
	default:
		return r.unreadable("Deployment "+olmlayout.Namespace+"/"+olmlayout.ObjectControllerDeployment, err)
	}
	return nil
}

// foreignFinalizers lists the ClusterObjectSets' teardown finalizers that another field manager
// owns; nothing where the CRD is absent.
func (r olmReader) foreignFinalizers(ctx context.Context) error {
	if r.o.ClusterObjectSetCRD == olmlayout.CRDAbsent {
		return nil
	}
	sets := &metav1.PartialObjectMetadataList{}
	sets.SetGroupVersionKind(olmv1.GroupVersion.WithKind("ClusterObjectSetList"))
	if err := r.c.List(ctx, sets); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return r.unreadable("ClusterObjectSets", err)
	}
	for i := range sets.Items {
		for _, m := range finalizerowner.Owners(sets.Items[i].ManagedFields, controllers.Finalizer) {
			if m != controllers.FieldOwner {
				r.o.ForeignFinalizers = append(r.o.ForeignFinalizers, sets.Items[i].Name+" ("+m+")")
			}
		}
	}
	return nil
}

// DecideRollout resolves --rollout: true and false as given; auto reads the cluster (ObserveOLM) and
// decides (olmlayout.Decide): two reconcilers, ours and OLM's (operator-controller, or
// object-controller in its newer layout), would fight over every ClusterObjectSet. It returns the
// decision and why, for the log.
func DecideRollout(ctx context.Context, cfg *rest.Config, flag string) (bool, string, error) {
	switch flag {
	case "true":
		return true, "--rollout=true", nil
	case "false":
		return false, "--rollout=false", nil
	}
	o, err := ObserveOLM(ctx, cfg)
	if err != nil {
		return false, "", err
	}
	d, err := olmlayout.Decide(o)
	return d.RollOut, d.Why, err
}
