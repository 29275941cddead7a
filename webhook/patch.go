package webhook

import (
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// respond allows the request, replacing spec.phases when they changed, and kubectl's last-applied
// annotation when it is too large to keep inline.
func (e *Externalizer) respond(obj *olmv1.ClusterObjectSet, phasesChanged bool, warnings []string) admission.Response {
	var ops []jsonpatch.JsonPatchOperation
	if phasesChanged {
		ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "add", Path: "/spec/phases", Value: obj.Spec.Phases})
	}
	if v, ok := obj.Annotations[cosadmission.LastAppliedAnnotation]; ok && len(v) > e.Options.Threshold && hasRefs(obj.Spec.Phases) {
		if rewritten, err := cosadmission.RewriteLastApplied(v, obj.Spec.Phases); err == nil && rewritten != v {
			ops = append(ops, jsonpatch.JsonPatchOperation{
				Operation: "add",
				Path:      "/metadata/annotations/" + strings.ReplaceAll(cosadmission.LastAppliedAnnotation, "/", "~1"),
				Value:     rewritten,
			})
		}
	}
	resp := admission.Allowed("")
	if len(ops) > 0 {
		resp = admission.Patched("", ops...)
	}
	return resp.WithWarnings(warnings...)
}

// hasRefs reports whether any object of phases is a ref.
func hasRefs(phases []olmv1.ClusterObjectSetPhase) bool {
	for _, p := range phases {
		for _, o := range p.Objects {
			if o.IsRef() {
				return true
			}
		}
	}
	return false
}
