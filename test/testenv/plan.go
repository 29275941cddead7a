package testenv

import (
	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

// PlannedSecrets returns the content plan the webhook makes for the inline objects of c (refs kept
// as given): the Secrets it would write, under the names it would use.
func PlannedSecrets(c *olmv1.ClusterObjectSet) (*content.Plan, error) {
	in := content.Input{Phases: make([]content.PhaseInput, len(c.Spec.Phases))}
	for i, p := range c.Spec.Phases {
		in.Phases[i].Name = p.Name
		for _, o := range p.Objects {
			if o.Object.Object != nil {
				in.Phases[i].Objects = append(in.Phases[i].Objects, content.ObjectInput{Object: o.Object.Object})
			} else {
				in.Phases[i].Objects = append(in.Phases[i].Objects, content.ObjectInput{Keep: &content.RefOut{SecretName: o.Ref.Name, Key: o.Ref.Key}})
			}
		}
	}
	return content.PlanFor(c.Name, in, content.Options{})
}
