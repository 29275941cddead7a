package testenv

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// PlannedSecrets returns the content plan the webhook makes for the inline objects of c (refs kept
// as given): the Secrets it would write, under the names it would use.
func PlannedSecrets(c *olmv1.ClusterObjectSet) (*content.Plan, error) {
	return content.PlanFor(c.Name, admission.PlanInput(c), content.Options{})
}

// StoredForm returns c as the webhook stores it, its inline objects replaced by the refs of their
// planned Secrets in SystemNamespace (what a backup holds), and the plan behind those refs.
func StoredForm(c *olmv1.ClusterObjectSet) (*olmv1.ClusterObjectSet, *content.Plan, error) {
	plan, err := PlannedSecrets(c)
	if err != nil {
		return nil, nil, err
	}
	stored := c.DeepCopy()
	stored.Spec.Phases = admission.WithRefs(c.Spec.Phases, plan, SystemNamespace)
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

// Restored is a ClusterObjectSet as restored from a backup without its Secrets: created in its stored
// form, refs with nothing behind them.
type Restored struct {
	Inline, Stored *olmv1.ClusterObjectSet // the manifest applied to heal it, and what the cluster holds
	Plan           *content.Plan           // the Secrets behind the refs
}

// CreateRestored creates a Restored ClusterObjectSet of three ConfigMaps (externalized always), named
// prefix and a number of its own per run: the Secrets of an earlier run (-count) may still be there.
// It is removed, with its Secrets, when the test ends.
func (e *Environment) CreateRestored(t testing.TB, prefix string) Restored {
	t.Helper()
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e6)
	e.RemoveWithSecretsAfter(t, name)
	inline := builders.COS(name, builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", name, 3)...))
	stored, plan, err := StoredForm(inline)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	if n := len(e.ObjectDataSecrets(t, name)); n != 0 {
		t.Fatalf("%d Secrets of a restored ClusterObjectSet before healing", n)
	}
	return Restored{Inline: inline, Stored: stored, Plan: plan}
}
