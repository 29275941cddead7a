package testenv

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/externalize"
)

// PlannedSecrets returns the content plan the webhook makes for the inline objects of c (refs kept
// as given): the Secrets it would write, under the names it would use.
func PlannedSecrets(c *olmv1.ClusterObjectSet) (*content.Plan, error) {
	return content.PlanFor(c.Name, externalize.PlanInput(c), content.Options{})
}

// StoredForm returns c as the webhook stores it, its inline objects replaced by the refs of their
// planned Secrets in SystemNamespace (what a backup holds), and the plan behind those refs.
func StoredForm(c *olmv1.ClusterObjectSet) (*olmv1.ClusterObjectSet, *content.Plan, error) {
	plan, err := PlannedSecrets(c)
	if err != nil {
		return nil, nil, err
	}
	stored := c.DeepCopy()
	stored.Spec.Phases = externalize.WithRefs(c.Spec.Phases, plan, SystemNamespace)
	return stored, plan, nil
}

// CheckPlannedSecrets fails t unless every Secret of plan exists in SystemNamespace with exactly
// its planned data (read through reader, uncached).
func CheckPlannedSecrets(ctx context.Context, t testing.TB, reader client.Reader, plan *content.Plan) {
	t.Helper()
	for _, want := range plan.Secrets {
		got := &corev1.Secret{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: SystemNamespace, Name: want.Name}, got); err != nil {
			t.Fatalf("Secret %s: %v", want.Name, err)
		}
		if !reflect.DeepEqual(got.Data, want.Data) {
			t.Errorf("Secret %s does not hold the planned content", want.Name)
		}
	}
}
