package testenv

import (
	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/externalize"
)

// PlannedSecrets returns the content plan the webhook makes for the inline objects of c (refs kept
// as given): the Secrets it would write, under the names it would use.
func PlannedSecrets(c *olmv1.ClusterObjectSet) (*content.Plan, error) {
	return content.PlanFor(c.Name, externalize.PlanInput(c), content.Options{})
}
