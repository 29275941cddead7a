package admission

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// wireCOS mirrors ClusterObjectSet with inline objects as plain maps, so that the whole request
// decodes in one pass (unstructured.Unstructured re-parses its bytes, and refuses objects without a
// kind, which validation, not decoding, must report with their field path).
type wireCOS struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            wireSpec          `json:"spec"`
	Status          json.RawMessage   `json:"status,omitempty"`
}

type wireSpec struct {
	LifecycleState          olmv1.LifecycleState      `json:"lifecycleState,omitempty"`
	Revision                int64                     `json:"revision"`
	Phases                  []wirePhase               `json:"phases,omitempty"`
	ProgressDeadlineMinutes int32                     `json:"progressDeadlineMinutes,omitempty"`
	ProgressionProbes       []olmv1.ProgressionProbe  `json:"progressionProbes,omitempty"`
	CollisionProtection     olmv1.CollisionProtection `json:"collisionProtection,omitempty"`
}

type wirePhase struct {
	Name                string                    `json:"name"`
	Objects             []wireObject              `json:"objects"`
	CollisionProtection olmv1.CollisionProtection `json:"collisionProtection,omitempty"`
}

type wireObject struct {
	Object              map[string]any            `json:"object,omitempty"`
	Ref                 olmv1.ObjectSourceRef     `json:"ref,omitzero"`
	CollisionProtection olmv1.CollisionProtection `json:"collisionProtection,omitempty"`
}

// DecodeCOS decodes a ClusterObjectSet as the webhook receives it (the object of an admission
// request, which is the JSON a client sent) in one pass (integers of inline objects as int64, as
// unstructured.Unstructured has them), and returns the size of its serialized spec as sent: the
// request's size less its metadata and status, which leaves apiVersion, kind and punctuation in:
// about 100 bytes over, against a threshold of 128 KiB. The webhook and kubectl cos decide with this
// size (Decide), so both externalize the same ClusterObjectSets.
func DecodeCOS(raw []byte) (*olmv1.ClusterObjectSet, int, error) {
	var w wireCOS
	if err := utiljson.Unmarshal(raw, &w); err != nil {
		return nil, 0, err
	}
	obj := &olmv1.ClusterObjectSet{
		TypeMeta:   w.TypeMeta,
		ObjectMeta: w.Metadata,
		Spec: olmv1.ClusterObjectSetSpec{
			LifecycleState:          w.Spec.LifecycleState,
			Revision:                w.Spec.Revision,
			ProgressDeadlineMinutes: w.Spec.ProgressDeadlineMinutes,
			ProgressionProbes:       w.Spec.ProgressionProbes,
			CollisionProtection:     w.Spec.CollisionProtection,
		},
	}
	if w.Spec.Phases != nil {
		obj.Spec.Phases = make([]olmv1.ClusterObjectSetPhase, len(w.Spec.Phases))
	}
	for i, p := range w.Spec.Phases {
		phase := olmv1.ClusterObjectSetPhase{Name: p.Name, CollisionProtection: p.CollisionProtection}
		if p.Objects != nil {
			phase.Objects = make([]olmv1.ClusterObjectSetObject, len(p.Objects))
		}
		for j, o := range p.Objects {
			phase.Objects[j] = olmv1.ClusterObjectSetObject{
				Object: unstructured.Unstructured{Object: o.Object}, Ref: o.Ref, CollisionProtection: o.CollisionProtection,
			}
		}
		obj.Spec.Phases[i] = phase
	}
	meta, err := json.Marshal(w.Metadata)
	if err != nil {
		return nil, 0, err
	}
	return obj, max(len(raw)-len(meta)-len(w.Status), 0), nil
}
