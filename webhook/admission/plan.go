package admission

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

// Planning a ClusterObjectSet's objects into Secrets, shared by the mutating webhook and kubectl cos
// apply so that both produce byte-identical Secrets and refs: the planner's input (PlanInput), the
// refs that replace the inline objects (WithRefs), and the refusal of an object too large for a
// Secret (TooLargeFieldError). The Secrets themselves are secretdata.ObjectDataSecret.

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

// TooLargeFieldError is the field error for an object that does not fit a Secret even compressed, at
// spec.phases[i].objects[j], with the planner's description (positions, kind, name and sizes; never
// content).
func TooLargeFieldError(e *content.TooLargeError) *field.Error {
	ferr := field.TooLong(field.NewPath("spec", "phases").Index(e.PhaseIndex).Child("objects").Index(e.Index), "", e.Budget)
	ferr.Detail = e.Error()
	return ferr
}
