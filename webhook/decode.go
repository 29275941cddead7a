package webhook

import (
	"encoding/json"
	"fmt"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// decodeCOS decodes a ClusterObjectSet from an admission request. Inline objects that
// unstructured.Unstructured refuses to decode (no kind, say) are kept as they are, so that validation,
// not decoding, reports them with their field path, as the API server's own validation would.
func decodeCOS(raw []byte) (*olmv1.ClusterObjectSet, error) {
	obj := &olmv1.ClusterObjectSet{}
	if err := json.Unmarshal(raw, obj); err == nil {
		return obj, nil
	}
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
	obj = &olmv1.ClusterObjectSet{}
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
