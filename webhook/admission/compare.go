package admission

import (
	"bytes"
	"fmt"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// SameContent reports whether the phases of an update carry the same content as the stored phases:
// the same phase names and collision protection, and for every object the same object, whether it is
// given inline or as a ref. Refs equal on both sides are not resolved; otherwise both sides are
// compared as canonical JSON, so a stored ref and the inline object it was made from are the same
// content whatever compression or key the ref's Secret used. systemNamespace is what an empty
// ref.namespace means.
func SameContent(old, updated []olmv1.ClusterObjectSetPhase, systemNamespace string, resolve secretdata.ResolveFunc) (bool, error) {
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

func sameObject(a, b olmv1.ClusterObjectSetObject, systemNamespace string, resolve secretdata.ResolveFunc) (bool, error) {
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

func canonicalOf(o olmv1.ClusterObjectSetObject, resolve secretdata.ResolveFunc) ([]byte, error) {
	obj := o.Object.Object
	if o.IsRef() {
		var err error
		if obj, err = resolve(o.Ref); err != nil {
			return nil, err
		}
	}
	return content.Canonical(obj)
}
