package app

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/finalizerowner"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/scheme"
)

// RolloutAuto is the default of --rollout: roll out unless OLM's operator-controller does.
const RolloutAuto = "auto"

// What OLM v1's release (operator-controller's Helm chart and manifests/*.yaml) puts in a cluster,
// as --rollout=auto reads it.
const (
	// OLMGeneratorAnnotation is on every CRD of OLM's release; its value is the feature set
	// (standard or experimental). Only the experimental set with BoxcutterRuntime on installs a
	// ClusterObjectSet CRD.
	OLMGeneratorAnnotation = "olm.operatorframework.io/generator"
	// OLMNamespace and OperatorControllerDeployment name operator-controller's Deployment.
	OLMNamespace                 = "olmv1-system"
	OperatorControllerDeployment = "operator-controller-controller-manager"
	// BoxcutterRuntimeGate is operator-controller's feature gate that runs its ClusterObjectSet
	// reconciler (alpha, off by default; OLM's experimental values turn it on).
	BoxcutterRuntimeGate = "BoxcutterRuntime"

	clusterExtensionCRD = "clusterextensions.olm.operatorframework.io"
	clusterObjectSetCRD = "clusterobjectsets.olm.operatorframework.io"
)

// CRDOrigin says whose ClusterObjectSet CRD the cluster serves.
type CRDOrigin string

// The origins of the ClusterObjectSet CRD.
const (
	CRDUnknown CRDOrigin = ""       // not readable
	CRDAbsent  CRDOrigin = "absent" // not installed
	CRDOLM     CRDOrigin = "olm"    // carries OLMGeneratorAnnotation
	CRDOther   CRDOrigin = "other"  // installed without it: ours (config/crd) or anyone's but OLM's release
)

// Gate is the state of a feature gate as a Deployment's args set it.
type Gate string

// The states of BoxcutterRuntime.
const (
	GateUnknown Gate = "" // Deployment not found or not readable, or the gate not set (its default depends on OLM's version)
	GateOn      Gate = "on"
	GateOff     Gate = "off"
)

// OLMObservations is what --rollout=auto reads of the cluster: plain values, decided by DecideAuto.
type OLMObservations struct {
	// ClusterExtensionServed: the API server serves OLM's ClusterExtension API.
	ClusterExtensionServed bool
	// FeatureSet is OLMGeneratorAnnotation of the ClusterExtension CRD: standard, experimental, or
	// empty when absent or not readable.
	FeatureSet string
	// ClusterObjectSetCRD is whose ClusterObjectSet CRD is installed.
	ClusterObjectSetCRD CRDOrigin
	// Gate is BoxcutterRuntimeGate in the args of operator-controller's Deployment.
	Gate Gate
	// ForeignFinalizers name the ClusterObjectSets whose teardown finalizer another field manager
	// than ours owns, as "name (manager)".
	ForeignFinalizers []string
	// Unreadable names what could not be read (Forbidden, or another error), for the message.
	Unreadable []string
}

// DecideAuto decides --rollout=auto from what was observed. Signals that OLM rolls ClusterObjectSets
// out: the ClusterObjectSet CRD is OLM's, operator-controller runs with BoxcutterRuntime on, another
// field manager holds the teardown finalizer of a ClusterObjectSet. Signals that it does not: no
// ClusterExtension API, OLM's standard feature set, a ClusterObjectSet CRD absent or not OLM's,
// BoxcutterRuntime off. Signals of one kind decide; both kinds, or none with the ClusterExtension API
// served, are an error that names what was seen and asks for --rollout=true or false.
func DecideAuto(o OLMObservations) (bool, string, error) {
	var olm, notOLM []string
	if o.ClusterObjectSetCRD == CRDOLM {
		olm = append(olm, "the ClusterObjectSet CRD is OLM's (annotation "+OLMGeneratorAnnotation+")")
	}
	if o.Gate == GateOn {
		olm = append(olm, "operator-controller runs with "+BoxcutterRuntimeGate+" on")
	}
	if n := len(o.ForeignFinalizers); n > 0 {
		names := o.ForeignFinalizers[:min(n, 3)]
		more := ""
		if n > 3 {
			more = fmt.Sprintf(" and %d more", n-3)
		}
		olm = append(olm, fmt.Sprintf("another field manager holds the teardown finalizer %s of ClusterObjectSet %s%s",
			controllers.Finalizer, strings.Join(names, ", "), more))
	}
	if !o.ClusterExtensionServed {
		notOLM = append(notOLM, "OLM's ClusterExtension API is not served")
	}
	if o.FeatureSet == "standard" {
		notOLM = append(notOLM, "OLM's ClusterExtension CRD is of the standard feature set, which rolls no ClusterObjectSet out")
	}
	switch o.ClusterObjectSetCRD {
	case CRDAbsent:
		notOLM = append(notOLM, "no ClusterObjectSet CRD is installed")
	case CRDOther:
		notOLM = append(notOLM, "the ClusterObjectSet CRD is not OLM's (no annotation "+OLMGeneratorAnnotation+")")
	}
	if o.Gate == GateOff {
		notOLM = append(notOLM, "operator-controller runs with "+BoxcutterRuntimeGate+" off")
	}
	seen := func(s []string) string { return strings.Join(s, "; ") }
	unread := ""
	if len(o.Unreadable) > 0 {
		unread = " (not readable: " + strings.Join(o.Unreadable, ", ") + ")"
	}
	switch {
	case len(olm) > 0 && len(notOLM) > 0:
		return false, "", fmt.Errorf("--rollout=auto: the signals disagree whether OLM's operator-controller rolls ClusterObjectSets out: it does, as %s; it does not, as %s%s; pass --rollout=false if it does (webhook-only), --rollout=true if not",
			seen(olm), seen(notOLM), unread)
	case len(olm) > 0:
		return false, "--rollout=auto: OLM's operator-controller rolls ClusterObjectSets out (" + seen(olm) + "); webhook-only mode (pass --rollout=true to roll out anyway)", nil
	case len(notOLM) > 0:
		return true, "--rollout=auto: OLM's operator-controller does not roll ClusterObjectSets out (" + seen(notOLM) + ")", nil
	}
	return false, "", fmt.Errorf("--rollout=auto: the cluster serves OLM's ClusterExtension API, but nothing tells whether its operator-controller rolls ClusterObjectSets out (feature set %q, no %s Deployment args, no ClusterObjectSet with its finalizer)%s; pass --rollout=false if it does (webhook-only), --rollout=true if not",
		o.FeatureSet, BoxcutterRuntimeGate, unread)
}

// GateFromArgs returns the state of gate that a component's args set with --feature-gates
// (k=v,k=v; repeated flags add up, the last value wins). An unset gate, or one that does not parse,
// is GateUnknown.
func GateFromArgs(args []string, gate string) Gate {
	state := GateUnknown
	for i := 0; i < len(args); i++ {
		var list string
		a, ok := strings.CutPrefix(args[i], "-")
		if !ok {
			continue
		}
		a = strings.TrimPrefix(a, "-")
		switch {
		case strings.HasPrefix(a, "feature-gates="):
			list = strings.TrimPrefix(a, "feature-gates=")
		case a == "feature-gates" && i+1 < len(args):
			i++
			list = args[i]
		default:
			continue
		}
		for _, kv := range strings.Split(list, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || strings.TrimSpace(k) != gate {
				continue
			}
			on, err := strconv.ParseBool(strings.TrimSpace(v))
			switch {
			case err != nil:
				state = GateUnknown
			case on:
				state = GateOn
			default:
				state = GateOff
			}
		}
	}
	return state
}

// The reads of --rollout=auto, each of one named object besides the ClusterObjectSets' metadata:
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=clusterextensions.olm.operatorframework.io,verbs=get
// +kubebuilder:rbac:groups=apps,resources=deployments,resourceNames=operator-controller-controller-manager,verbs=get,namespace=olmv1-system

// ObserveOLM reads what DecideAuto decides on. A Forbidden or NotFound read is an observation
// (unknown, absent); discovery failing is an error.
func ObserveOLM(ctx context.Context, cfg *rest.Config) (OLMObservations, error) {
	var o OLMObservations
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
	for _, read := range []func(context.Context) error{r.featureSet, r.clusterObjectSetCRD, r.gate, r.foreignFinalizers} {
		if err := read(ctx); err != nil {
			return o, err
		}
	}
	return o, nil
}

// olmReader makes the reads of ObserveOLM after discovery, each into o.
type olmReader struct {
	c client.Client
	o *OLMObservations
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
		r.o.FeatureSet = crd.Annotations[OLMGeneratorAnnotation]
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
		r.o.ClusterObjectSetCRD = CRDOther
		if _, ok := crd.Annotations[OLMGeneratorAnnotation]; ok {
			r.o.ClusterObjectSetCRD = CRDOLM
		}
	case apierrors.IsNotFound(err):
		r.o.ClusterObjectSetCRD = CRDAbsent
	default:
		return r.unreadable("CRD "+clusterObjectSetCRD, err)
	}
	return nil
}

// gate reads the BoxcutterRuntime gate from the arguments of OLM's operator-controller.
func (r olmReader) gate(ctx context.Context) error {
	deploy := &appsv1.Deployment{}
	switch err := r.c.Get(ctx, client.ObjectKey{Namespace: OLMNamespace, Name: OperatorControllerDeployment}, deploy); {
	case err == nil:
		for _, ctr := range deploy.Spec.Template.Spec.Containers {
			if g := GateFromArgs(append(slices.Clone(ctr.Command), ctr.Args...), BoxcutterRuntimeGate); g != GateUnknown {
				r.o.Gate = g
			}
		}
	case apierrors.IsNotFound(err):
	default:
		return r.unreadable("Deployment "+OLMNamespace+"/"+OperatorControllerDeployment, err)
	}
	return nil
}

// foreignFinalizers lists the ClusterObjectSets' teardown finalizers that another field manager
// owns; nothing where the CRD is absent.
func (r olmReader) foreignFinalizers(ctx context.Context) error {
	if r.o.ClusterObjectSetCRD == CRDAbsent {
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
// decides (DecideAuto): two reconcilers, ours and OLM's operator-controller, would fight over every
// ClusterObjectSet. It returns the decision and why, for the log.
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
	return DecideAuto(o)
}
