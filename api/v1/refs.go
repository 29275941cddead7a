package v1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// IsRef reports whether o is given as a ref to a Secret rather than inline. The API requires
// exactly one of object and ref (the CRD's CEL rules, repeated by the validating webhook), so an
// entry that breaks the rule is seen only before validation: one with both is inline (its object
// wins), one with neither is a ref that names no Secret.
func (o ClusterObjectSetObject) IsRef() bool { return o.Object.Object == nil }

// SecretRef returns the Secret o references, and whether it references one: o is a ref (IsRef) that
// names a Secret. systemNamespace is what an empty ref.namespace means.
func (o ClusterObjectSetObject) SecretRef(systemNamespace string) (types.NamespacedName, bool) {
	if !o.IsRef() || o.Ref.Name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: o.Ref.NamespaceOr(systemNamespace), Name: o.Ref.Name}, true
}

// ReferencedSecrets returns the Secrets c references (SecretRef), each once, in spec order.
// systemNamespace is what an empty ref.namespace means. Their "namespace/name" (String) are the keys
// of the field index of ClusterObjectSets by referenced Secret.
func (c *ClusterObjectSet) ReferencedSecrets(systemNamespace string) []types.NamespacedName {
	var out []types.NamespacedName
	seen := map[types.NamespacedName]bool{}
	for _, p := range c.Spec.Phases {
		for _, o := range p.Objects {
			if key, ok := o.SecretRef(systemNamespace); ok && !seen[key] {
				seen[key] = true
				out = append(out, key)
			}
		}
	}
	return out
}

// RefTo reports whether c references the Secret namespace/name (SecretRef), and the field path of
// the first ref to it. systemNamespace is what an empty ref.namespace means.
func (c *ClusterObjectSet) RefTo(namespace, name, systemNamespace string) (string, bool) {
	want := types.NamespacedName{Namespace: namespace, Name: name}
	for i, p := range c.Spec.Phases {
		for j, o := range p.Objects {
			if key, ok := o.SecretRef(systemNamespace); ok && key == want {
				return fmt.Sprintf("spec.phases[%d].objects[%d].ref", i, j), true
			}
		}
	}
	return "", false
}

// RefsOutside reports whether c references a Secret outside systemNamespace (what an empty
// ref.namespace means). The manager watches only the system namespace's object-data Secrets.
func (c *ClusterObjectSet) RefsOutside(systemNamespace string) bool {
	for _, key := range c.ReferencedSecrets(systemNamespace) {
		if key.Namespace != systemNamespace {
			return true
		}
	}
	return false
}
