package externalize

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
)

// ResolveFunc returns the object a ref points at.
type ResolveFunc func(ref olmv1.ObjectSourceRef) (map[string]any, error)

// SameContent reports whether the phases of an update carry the same content as the stored phases:
// the same phase names and collision protection, and for every object the same object, whether it is
// given inline or as a ref. Refs equal on both sides are not resolved; otherwise both sides are
// compared as canonical JSON, so a stored ref and the inline object it was made from are the same
// content whatever compression or key the ref's Secret used. systemNamespace is what an empty
// ref.namespace means.
func SameContent(old, updated []olmv1.ClusterObjectSetPhase, systemNamespace string, resolve ResolveFunc) (bool, error) {
	if len(old) != len(updated) {
		return false, nil
	}
	for i := range old {
		po, pn := old[i], updated[i]
		if po.Name != pn.Name || po.CollisionProtection != pn.CollisionProtection || len(po.Objects) != len(pn.Objects) {
			return false, nil
		}
		for j := range po.Objects {
			same, err := sameObject(po.Objects[j], pn.Objects[j], systemNamespace, resolve)
			if err != nil {
				return false, fmt.Errorf("phase %q object %d: %w", po.Name, j, err)
			}
			if !same {
				return false, nil
			}
		}
	}
	return true, nil
}

func sameObject(a, b olmv1.ClusterObjectSetObject, systemNamespace string, resolve ResolveFunc) (bool, error) {
	if a.CollisionProtection != b.CollisionProtection {
		return false, nil
	}
	if a.IsRef() && b.IsRef() && a.Ref.Name == b.Ref.Name && a.Ref.Key == b.Ref.Key &&
		a.Ref.NamespaceOr(systemNamespace) == b.Ref.NamespaceOr(systemNamespace) {
		return true, nil
	}
	ca, err := canonicalOf(a, resolve)
	if err != nil {
		return false, err
	}
	cb, err := canonicalOf(b, resolve)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

func canonicalOf(o olmv1.ClusterObjectSetObject, resolve ResolveFunc) ([]byte, error) {
	obj := o.Object.Object
	if o.IsRef() {
		var err error
		if obj, err = resolve(o.Ref); err != nil {
			return nil, err
		}
	}
	return content.Canonical(obj)
}

// RewriteLastApplied returns kubectl's last-applied annotation value with its spec.phases replaced
// by phases, so that the annotation holds the stored (externalized) form. The result is
// deterministic: the same inputs always give the same bytes.
func RewriteLastApplied(value string, phases []olmv1.ClusterObjectSetPhase) (string, error) {
	var applied map[string]any
	if err := json.Unmarshal([]byte(value), &applied); err != nil {
		return "", fmt.Errorf("the %s annotation is not a JSON object: %w", LastAppliedAnnotation, err)
	}
	spec, ok := applied["spec"].(map[string]any)
	if !ok {
		return value, nil
	}
	b, err := json.Marshal(phases)
	if err != nil {
		return "", err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return "", err
	}
	spec["phases"] = generic
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(applied); err != nil {
		return "", err
	}
	// kubectl ends the annotation with a newline, as Encode does.
	return buf.String(), nil
}

// Inline returns phases with every ref replaced by the object it resolves to: the fully resolved,
// inline form of a ClusterObjectSet. Objects are deep copies (resolve may share them); phases itself
// is not changed. Errors name the phase and object index.
func Inline(phases []olmv1.ClusterObjectSetPhase, resolve ResolveFunc) ([]olmv1.ClusterObjectSetPhase, error) {
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
