package admission

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// Inline returns phases with every ref replaced by the object it resolves to: the fully resolved,
// inline form of a ClusterObjectSet. Objects are deep copies (resolve may share them); phases itself
// is not changed. Errors name the phase and object index.
func Inline(phases []olmv1.ClusterObjectSetPhase, resolve secretdata.ResolveFunc) ([]olmv1.ClusterObjectSetPhase, error) {
	out := make([]olmv1.ClusterObjectSetPhase, len(phases))
	for i, p := range phases {
		objs := make([]olmv1.ClusterObjectSetObject, len(p.Objects))
		for j, o := range p.Objects {
			if o.IsRef() {
				obj, err := resolve(o.Ref)
				if err != nil {
					return nil, fmt.Errorf("phase %q object %d: %w", p.Name, j, err)
				}
				o = olmv1.ClusterObjectSetObject{CollisionProtection: o.CollisionProtection}
				o.Object.Object = runtime.DeepCopyJSON(obj)
			} else {
				o = *o.DeepCopy()
			}
			objs[j] = o
		}
		p.Objects = objs
		out[i] = p
	}
	return out, nil
}
