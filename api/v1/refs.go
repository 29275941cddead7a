package v1

import "fmt"

// RefTo reports whether c has a ref to the Secret namespace/name, and the field path of the first
// one. systemNamespace is what an empty ref.namespace means.
func (c *ClusterObjectSet) RefTo(namespace, name, systemNamespace string) (string, bool) {
	for i, p := range c.Spec.Phases {
		for j, o := range p.Objects {
			if o.Object.Object == nil && o.Ref.Name == name && o.Ref.NamespaceOr(systemNamespace) == namespace {
				return fmt.Sprintf("spec.phases[%d].objects[%d].ref", i, j), true
			}
		}
	}
	return "", false
}

// RefsOutside reports whether c has a ref to a Secret outside systemNamespace (what an empty
// ref.namespace means). The manager watches only the system namespace's object-data Secrets.
func (c *ClusterObjectSet) RefsOutside(systemNamespace string) bool {
	for _, p := range c.Spec.Phases {
		for _, o := range p.Objects {
			if o.Object.Object == nil && o.Ref.Name != "" && o.Ref.NamespaceOr(systemNamespace) != systemNamespace {
				return true
			}
		}
	}
	return false
}
