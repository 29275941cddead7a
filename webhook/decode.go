package webhook

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// decodeCOS decodes a ClusterObjectSet from an admission request, and returns the size of its
// serialized spec as sent. Inline objects that unstructured.Unstructured refuses to decode (no kind,
// say) are kept as they are, so that validation, not decoding, reports them with their field path, as
// the API server's own validation would.
func decodeCOS(raw []byte) (*olmv1.ClusterObjectSet, int, error) {
	var parts struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            json.RawMessage   `json:"spec"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, 0, err
	}
	obj := &olmv1.ClusterObjectSet{TypeMeta: parts.TypeMeta, ObjectMeta: parts.Metadata}
	if len(parts.Spec) == 0 || json.Unmarshal(parts.Spec, &obj.Spec) == nil {
		return obj, len(parts.Spec), nil
	}
	obj, err := decodeTolerant(raw)
	return obj, len(parts.Spec), err
}

// decodeTolerant decodes raw with its inline objects set aside, then puts them back as they are.
func decodeTolerant(raw []byte) (*olmv1.ClusterObjectSet, error) {
	var generic map[string]any
	if err := utiljson.Unmarshal(raw, &generic); err != nil {
		return nil, err
	}
	type place struct{ phase, object int }
	inline := map[place]map[string]any{}
	spec, _ := generic["spec"].(map[string]any)
	phases, _ := spec["phases"].([]any)
	for i, p := range phases {
		pm, _ := p.(map[string]any)
		objs, _ := pm["objects"].([]any)
		for j, o := range objs {
			om, _ := o.(map[string]any)
			if inner, ok := om["object"].(map[string]any); ok {
				inline[place{i, j}] = inner
				delete(om, "object")
			}
		}
	}
	rest, err := json.Marshal(generic)
	if err != nil {
		return nil, err
	}
	obj := &olmv1.ClusterObjectSet{}
	if err := json.Unmarshal(rest, obj); err != nil {
		return nil, err
	}
	for at, inner := range inline {
		if at.phase >= len(obj.Spec.Phases) || at.object >= len(obj.Spec.Phases[at.phase].Objects) {
			return nil, fmt.Errorf("spec.phases[%d].objects[%d]: cannot place the inline object", at.phase, at.object)
		}
		obj.Spec.Phases[at.phase].Objects[at.object].Object.Object = inner
	}
	return obj, nil
}
