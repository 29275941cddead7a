package webhook

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/externalize"
	"github.com/cos-externalizer/cos-externalizer/objectdata"
)

// restoreStoredPhases handles an update whose phases differ from the stored ones: when they carry
// the same content (typically the inline form of stored refs, re-applied by kubectl or a GitOps
// tool), the stored phases are put back, so nothing changes. It reports whether it restored them,
// and a warning when the stored content could not be read to compare (validation then refuses the
// update as a change of immutable phases).
func (e *Externalizer) restoreStoredPhases(ctx context.Context, old, obj *olmv1.ClusterObjectSet) (bool, string) {
	if len(old.Spec.Phases) == 0 || apiequality.Semantic.DeepEqual(old.Spec.Phases, obj.Spec.Phases) {
		return false, ""
	}
	same, err := externalize.SameContent(old.Spec.Phases, obj.Spec.Phases, e.Options.SystemNamespace, e.resolver(ctx))
	if err != nil {
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
// one request share a budget of Options.MaxResolvedBytes (objectdata.Resolver).
func (e *Externalizer) resolver(ctx context.Context) externalize.ResolveFunc {
	return objectdata.Resolver(ctx, e.Reader, e.Options.SystemNamespace, e.Options.MaxResolvedBytes)
}
