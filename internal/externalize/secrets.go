package externalize

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/validation"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
)

// The pure part of writing a ClusterObjectSet's objects into Secrets, shared by the mutating webhook
// and kubectl cos apply so that both produce byte-identical Secrets and refs: the planner's input
// (PlanInput), the Secrets to create (ObjectDataSecret), when an existing Secret may stand for one
// (Unusable), and the refs that replace the inline objects (WithRefs).

// PlanInput turns the phases of obj into the content planner's input (content.PlanFor): inline objects
// to externalize, refs kept as given.
func PlanInput(obj *olmv1.ClusterObjectSet) content.Input {
	in := content.Input{Phases: make([]content.PhaseInput, len(obj.Spec.Phases))}
	for i, p := range obj.Spec.Phases {
		pi := content.PhaseInput{Name: p.Name, Objects: make([]content.ObjectInput, len(p.Objects))}
		for j, o := range p.Objects {
			if !o.IsRef() {
				pi.Objects[j] = content.ObjectInput{Object: o.Object.Object}
			} else {
				pi.Objects[j] = content.ObjectInput{Keep: &content.RefOut{SecretName: o.Ref.Name, Key: o.Ref.Key}}
			}
		}
		in.Phases[i] = pi
	}
	return in
}

// WithRefs returns phases with the inline objects replaced by the planned refs, into Secrets of
// systemNamespace; refs given by the user stay as they were. phases itself is not changed.
func WithRefs(phases []olmv1.ClusterObjectSetPhase, plan *content.Plan, systemNamespace string) []olmv1.ClusterObjectSetPhase {
	out := make([]olmv1.ClusterObjectSetPhase, len(phases))
	for i, p := range phases {
		objs := make([]olmv1.ClusterObjectSetObject, len(p.Objects))
		for j, o := range p.Objects {
			if !o.IsRef() {
				r := plan.Refs[i][j]
				o = olmv1.ClusterObjectSetObject{
					Ref:                 olmv1.ObjectSourceRef{Name: r.SecretName, Namespace: systemNamespace, Key: r.Key},
					CollisionProtection: o.CollisionProtection,
				}
			}
			objs[j] = o
		}
		p.Objects = objs
		out[i] = p
	}
	return out
}

// ObjectDataSecret returns the Secret to create for one planned Secret of the ClusterObjectSet
// cosName, in namespace: typed object-data, immutable, labelled with the revision name, and without
// an owner (the reconciler adds the ClusterObjectSet once it exists). Its data is the plan's, not
// copied.
func ObjectDataSecret(cosName, namespace string, s content.SecretOut) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      s.Name,
			Namespace: namespace,
			Labels:    map[string]string{olmv1.LabelRevisionName: content.RevisionLabelValue(cosName)},
		},
		Type:      olmv1.SecretTypeObjectData,
		Immutable: ptr.To(true),
		Data:      s.Data,
	}
}

// Unusable returns why an existing Secret got cannot stand for the wanted one (ObjectDataSecret): it
// must be exactly ours, with the same type, immutable, labelled for the same ClusterObjectSet and
// holding exactly the same data. Empty means it can. The reasons never quote content.
func Unusable(got, want *corev1.Secret) []string {
	var why []string
	if got.Type != want.Type {
		why = append(why, fmt.Sprintf("its type is %q", got.Type))
	}
	if !ptr.Deref(got.Immutable, false) {
		why = append(why, "it is not immutable")
	}
	if got.Labels[olmv1.LabelRevisionName] != want.Labels[olmv1.LabelRevisionName] {
		why = append(why, "it belongs to another ClusterObjectSet")
	}
	if !reflect.DeepEqual(got.Data, want.Data) {
		why = append(why, "its data differs from the content it must hold")
	}
	return why
}

// TooLargeFieldError is the field error for an object that does not fit a Secret even compressed, at
// spec.phases[i].objects[j], with the planner's description (positions, kind, name and sizes; never
// content).
func TooLargeFieldError(e *content.TooLargeError) *field.Error {
	ferr := field.TooLong(field.NewPath("spec", "phases").Index(e.PhaseIndex).Child("objects").Index(e.Index), "", e.Budget)
	ferr.Detail = e.Error()
	return ferr
}

// ImmutablePhasesHint is added to the CRD's "phases is immutable" refusal: editing an object of an
// existing ClusterObjectSet is not how revisions change.
const ImmutablePhasesHint = "; to change its objects, create a new ClusterObjectSet with a new name and the next revision (the reconciler hands the objects over and archives this one)"

// UpdateErrors validates an update from old to obj: the CRD's rules with limits, the webhook's own
// phase-order rule, and the workflow hint on an immutable-phases refusal.
func UpdateErrors(limits validation.Limits, old, obj *olmv1.ClusterObjectSet) field.ErrorList {
	errs := append(limits.ValidateUpdate(old, obj), validation.ValidatePhaseOrder(old, obj)...)
	for _, e := range errs {
		if e.Type == field.ErrorTypeInvalid && e.Detail == "phases is immutable" {
			e.Detail += ImmutablePhasesHint
		}
	}
	return errs
}
