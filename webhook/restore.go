package webhook

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/externalize"
	"github.com/cos-externalizer/cos-externalizer/objectdata"
)

// restoreStoredPhases handles an update whose phases differ from the stored ones: when they carry
// the same content (typically the inline form of stored refs, re-applied by kubectl or a GitOps
// tool), the stored phases are put back, so nothing changes. It reports whether it restored them,
// and a warning when the stored content could not be read to compare (validation then refuses the
// update as a change of immutable phases) unless the submitted objects plan exactly the stored refs:
// then the Secrets behind them, deleted or damaged, are written again (healStoredRefs).
func (e *Externalizer) restoreStoredPhases(ctx context.Context, old, obj *olmv1.ClusterObjectSet, dryRun bool) (bool, string) {
	if len(old.Spec.Phases) == 0 || apiequality.Semantic.DeepEqual(old.Spec.Phases, obj.Spec.Phases) {
		return false, ""
	}
	same, err := externalize.SameContent(old.Spec.Phases, obj.Spec.Phases, e.Options.SystemNamespace, e.resolver(ctx))
	if err != nil {
		if n, healed := e.healStoredRefs(ctx, old, obj, dryRun); healed {
			what := fmt.Sprintf("%sthe stored refs could not be read (%v); the submitted objects are their content: re-created %s of them",
				warningPrefix, err, plural(n, "Secret"))
			if dryRun {
				what = fmt.Sprintf("%sthe stored refs could not be read (%v); the submitted objects are their content, and would re-create them", warningPrefix, err)
			}
			obj.Spec.Phases = old.Spec.Phases
			return true, what
		}
		ctrl.LoggerFrom(ctx).Info("could not compare the update with the stored objects", "error", err.Error())
		return false, warningPrefix + "could not compare the submitted phases with the stored ones: " + err.Error()
	}
	if !same {
		return false, ""
	}
	obj.Spec.Phases = old.Spec.Phases
	return true, ""
}

// resolver reads a ref's Secret and returns the object it holds, verifying content keys. The refs of
// one request share a budget of Options.MaxResolvedBytes, drawn from Options.ResolvePool until the
// request ends (objectdata.PoolResolver).
func (e *Externalizer) resolver(ctx context.Context) externalize.ResolveFunc {
	return objectdata.PoolResolver(ctx, e.Options.ResolvePool, e.Reader, e.Options.SystemNamespace, e.Options.MaxResolvedBytes)
}

// healStoredRefs writes again the Secrets of the stored refs when the submitted objects are their
// content: planned for this ClusterObjectSet, they give exactly the stored phases (content keys are
// SHA-256 of the content, so equal refs prove equal content). This is how a re-apply of the same
// manifests restores Secrets someone deleted (a bulk delete, a namespace restored without them):
// missing Secrets are created, present ones reused as on any write. It reports how many it created
// and whether the stored refs were those of the submitted objects and their Secrets are now
// (or, on a dry run, would be) in place; a failed write is logged and reported as not healed.
func (e *Externalizer) healStoredRefs(ctx context.Context, old, obj *olmv1.ClusterObjectSet, dryRun bool) (int, bool) {
	if obj.Name == "" || externalize.CountInline(obj.Spec.Phases) == 0 {
		return 0, false
	}
	plan, err := content.PlanFor(obj.Name, externalize.PlanInput(obj), content.Options{})
	if err != nil || !apiequality.Semantic.DeepEqual(old.Spec.Phases, externalize.WithRefs(obj.Spec.Phases, plan, e.Options.SystemNamespace)) {
		return 0, false
	}
	n, _, reason := e.writeSecrets(ctx, obj.Name, plan, dryRun)
	if reason != "" {
		ctrl.LoggerFrom(ctx).Info("could not write again the Secrets of the stored refs", "reason", reason)
		return 0, false
	}
	e.Metrics.SecretsWritten.Add(float64(n))
	ctrl.LoggerFrom(ctx).Info("wrote again the Secrets of the stored refs", "secrets", len(plan.Secrets), "secretsCreated", n, "dryRun", dryRun)
	return n, true
}
