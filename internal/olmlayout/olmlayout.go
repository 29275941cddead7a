// Package olmlayout decides whether OLM v1 rolls ClusterObjectSets out in a cluster, from what its
// release leaves there, in either of its layouts: the reconciler inside operator-controller
// (its BoxcutterRuntime gate on), or a Deployment of its own, object-controller, beside or without
// operator-controller. It is the pure decision of the manager's --rollout=auto, which reads the
// cluster and hands the reads over as Observations.
package olmlayout

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// What OLM v1's release (operator-controller's Helm chart helm/olmv1 and manifests/*.yaml) puts in
// a cluster, as --rollout=auto reads it.
const (
	// GeneratorAnnotation is on every CRD of OLM's release; its value is the feature set
	// (standard or experimental). Only the experimental set installs a ClusterObjectSet CRD.
	GeneratorAnnotation = "olm.operatorframework.io/generator"
	// Namespace is where OLM's release runs its controllers.
	Namespace = "olmv1-system"
	// OperatorControllerDeployment is operator-controller's Deployment (and ServiceAccount).
	OperatorControllerDeployment = "operator-controller-controller-manager"
	// ObjectControllerDeployment is object-controller's Deployment (and ServiceAccount), in OLM's
	// newer layout: the ClusterObjectSet reconciler in a binary of its own. Its chart renders it for
	// the experimental feature set with BoxcutterRuntime on, or when enabled alone.
	ObjectControllerDeployment = "object-controller-controller-manager"
	// BoxcutterRuntimeGate is operator-controller's feature gate that runs its ClusterObjectSet
	// applier (alpha, off by default; OLM's experimental values turn it on).
	BoxcutterRuntimeGate = "BoxcutterRuntime"
)

// CRDOrigin says whose ClusterObjectSet CRD the cluster serves.
type CRDOrigin string

// The origins of the ClusterObjectSet CRD.
const (
	CRDUnknown CRDOrigin = ""       // not readable
	CRDAbsent  CRDOrigin = "absent" // not installed
	CRDOLM     CRDOrigin = "olm"    // carries GeneratorAnnotation
	CRDOther   CRDOrigin = "other"  // installed without it: ours (config/crd) or anyone's but OLM's release
)

// CRDOriginOf is the origin of an installed ClusterObjectSet CRD with these annotations.
func CRDOriginOf(annotations map[string]string) CRDOrigin {
	if _, ok := annotations[GeneratorAnnotation]; ok {
		return CRDOLM
	}
	return CRDOther
}

// Gate is the state of a feature gate as a Deployment's args set it.
type Gate string

// The states of BoxcutterRuntime.
const (
	GateUnknown Gate = "" // Deployment not found or not readable, or the gate not set (its default depends on OLM's version)
	GateOn      Gate = "on"
	GateOff     Gate = "off"
)

// Presence says whether a named object exists.
type Presence string

// The presences of object-controller's Deployment.
const (
	PresenceUnknown Presence = ""        // not readable
	Absent          Presence = "absent"  // not found
	Present         Presence = "present" // found
)

// Observations is what --rollout=auto reads of the cluster: plain values, decided by Decide.
type Observations struct {
	// ClusterExtensionServed: the API server serves OLM's ClusterExtension API.
	ClusterExtensionServed bool
	// FeatureSet is GeneratorAnnotation of the ClusterExtension CRD: standard, experimental, or
	// empty when absent or not readable.
	FeatureSet string
	// ClusterObjectSetCRD is whose ClusterObjectSet CRD is installed.
	ClusterObjectSetCRD CRDOrigin
	// Gate is BoxcutterRuntimeGate in the args of operator-controller's Deployment.
	Gate Gate
	// ObjectController is whether object-controller's Deployment exists.
	ObjectController Presence
	// ForeignFinalizers name the ClusterObjectSets whose teardown finalizer another field manager
	// than ours owns, as "name (manager)".
	ForeignFinalizers []string
	// Unreadable names what could not be read (Forbidden, or another error), for the message.
	Unreadable []string
}

// Layout is which of OLM's components rolls ClusterObjectSets out.
type Layout string

// OLM's layouts.
const (
	// LayoutNone: OLM does not roll ClusterObjectSets out (absent, or its standard feature set).
	LayoutNone Layout = "none"
	// LayoutOperatorController: operator-controller rolls them out itself (BoxcutterRuntime on).
	LayoutOperatorController Layout = "operator-controller"
	// LayoutObjectController: object-controller, a Deployment of its own, rolls them out.
	LayoutObjectController Layout = "object-controller"
)

// Decision is what Decide makes of Observations.
type Decision struct {
	// RollOut: this manager rolls ClusterObjectSets out (--rollout=true).
	RollOut bool
	// Layout is the layout OLM was seen in.
	Layout Layout
	// Why says so, for the log.
	Why string
}

// Decide decides --rollout=auto from what was observed. Signals that OLM rolls ClusterObjectSets out:
// the ClusterObjectSet CRD is OLM's, object-controller's Deployment exists, operator-controller runs
// with BoxcutterRuntime on, another field manager holds the teardown finalizer of a ClusterObjectSet.
// Signals that it does not: a ClusterObjectSet CRD absent or not OLM's; and, where no
// object-controller runs (these speak of operator-controller alone, and object-controller can run
// without it), no ClusterExtension API, OLM's standard feature set, BoxcutterRuntime off. Signals of
// one kind decide; both kinds, or none with the ClusterExtension API served, are an error that names
// what was seen and asks for --rollout=true or false.
func Decide(o Observations) (Decision, error) {
	var olm, notOLM []string
	if o.ClusterObjectSetCRD == CRDOLM {
		olm = append(olm, "the ClusterObjectSet CRD is OLM's (annotation "+GeneratorAnnotation+")")
	}
	objectController := o.ObjectController == Present
	if objectController {
		olm = append(olm, "object-controller's Deployment "+Namespace+"/"+ObjectControllerDeployment+" exists")
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
		olm = append(olm, fmt.Sprintf("another field manager holds the teardown finalizer of ClusterObjectSet %s%s",
			strings.Join(names, ", "), more))
	}
	if !o.ClusterExtensionServed && !objectController {
		notOLM = append(notOLM, "OLM's ClusterExtension API is not served")
	}
	if o.FeatureSet == "standard" && !objectController {
		notOLM = append(notOLM, "OLM's ClusterExtension CRD is of the standard feature set, which rolls no ClusterObjectSet out")
	}
	switch o.ClusterObjectSetCRD {
	case CRDAbsent:
		notOLM = append(notOLM, "no ClusterObjectSet CRD is installed")
	case CRDOther:
		notOLM = append(notOLM, "the ClusterObjectSet CRD is not OLM's (no annotation "+GeneratorAnnotation+")")
	}
	if o.Gate == GateOff && !objectController {
		notOLM = append(notOLM, "operator-controller runs with "+BoxcutterRuntimeGate+" off")
	}
	seen := func(s []string) string { return strings.Join(s, "; ") }
	unread := ""
	if len(o.Unreadable) > 0 {
		unread = " (not readable: " + strings.Join(o.Unreadable, ", ") + ")"
	}
	layout := LayoutOperatorController
	if objectController {
		layout = LayoutObjectController
	}
	switch {
	case len(olm) > 0 && len(notOLM) > 0:
		return Decision{}, fmt.Errorf("--rollout=auto: the signals disagree whether OLM rolls ClusterObjectSets out: it does, as %s; it does not, as %s%s; pass --rollout=false if it does (webhook-only), --rollout=true if not",
			seen(olm), seen(notOLM), unread)
	case len(olm) > 0:
		return Decision{Layout: layout,
			Why: "--rollout=auto: OLM's " + string(layout) + " rolls ClusterObjectSets out (" + seen(olm) + "); webhook-only mode (pass --rollout=true to roll out anyway)"}, nil
	case len(notOLM) > 0:
		return Decision{RollOut: true, Layout: LayoutNone,
			Why: "--rollout=auto: OLM does not roll ClusterObjectSets out (" + seen(notOLM) + ")"}, nil
	}
	return Decision{}, fmt.Errorf("--rollout=auto: the cluster serves OLM's ClusterExtension API, but nothing tells whether OLM rolls ClusterObjectSets out (feature set %q, no %s in operator-controller's Deployment args, no %s Deployment, no ClusterObjectSet with its finalizer)%s; pass --rollout=false if it does (webhook-only), --rollout=true if not",
		o.FeatureSet, BoxcutterRuntimeGate, ObjectControllerDeployment, unread)
}

// DeploymentGate returns the state of gate that a Deployment's containers set in their command and
// args (GateFromArgs); the last container that sets it wins.
func DeploymentGate(d *appsv1.Deployment, gate string) Gate {
	state := GateUnknown
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if g := GateFromArgs(append(slices.Clone(ctr.Command), ctr.Args...), gate); g != GateUnknown {
			state = g
		}
	}
	return state
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
