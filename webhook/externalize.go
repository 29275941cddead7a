package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/externalize"
	"github.com/cos-externalizer/cos-externalizer/internal/validation"
	"github.com/cos-externalizer/cos-externalizer/objectdata"
)

// The mutating webhook. sideEffects NoneOnDryRun: a dry run writes nothing and gets the same patch.
// The API server calls it only for ClusterObjectSets with inline objects and for updates that change
// stored phases (matchConditions), so that refs-only ones (what OLM writes, and its later updates)
// are admitted while the manager is down; the second entry, on the same handler, checks the refs of
// a refs-only create (warnings) when the manager is up and is ignored when it is not.
// +kubebuilder:webhook:path=/mutate-olm-operatorframework-io-v1-clusterobjectset,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=olm.operatorframework.io,resources=clusterobjectsets,verbs=create;update,versions=v1,name=externalize.cos-externalizer.io,admissionReviewVersions=v1,timeoutSeconds=15,reinvocationPolicy=IfNeeded,patch=`{"matchConditions":[{"name":"has-inline-objects-or-changes-phases","expression":"(has(object.spec) && has(object.spec.phases) && object.spec.phases.exists(p, has(p.objects) && p.objects.exists(o, has(o.object)))) || (request.operation == 'UPDATE' && has(oldObject.spec) && has(oldObject.spec.phases) && size(oldObject.spec.phases) > 0 && (has(object.spec) && has(object.spec.phases) ? object.spec.phases : []) != oldObject.spec.phases)"}]}`
// +kubebuilder:webhook:path=/mutate-olm-operatorframework-io-v1-clusterobjectset,mutating=true,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups=olm.operatorframework.io,resources=clusterobjectsets,verbs=create;update,versions=v1,name=check-refs.cos-externalizer.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"sets-refs-only","expression":"has(object.spec) && has(object.spec.phases) && size(object.spec.phases) > 0 && !object.spec.phases.exists(p, has(p.objects) && p.objects.exists(o, has(o.object))) && (request.operation == 'CREATE' || !has(oldObject.spec) || !has(oldObject.spec.phases) || size(oldObject.spec.phases) == 0)"}]}`
// +kubebuilder:webhookconfiguration:mutating=true,name=cos-externalizer

// +kubebuilder:rbac:groups="",namespace=olmv1-system,resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterobjectsets,verbs=get;list;watch

// Externalizer is the mutating webhook.
type Externalizer struct {
	// Client writes Secrets.
	Client client.Client
	// Reader reads Secrets uncached, so a Secret written a moment ago is seen.
	Reader  client.Reader
	Options Options
	Metrics *Metrics
	// Limits are the served CRD's bounds; nil: the generated CRD's.
	Limits *ServedLimits
}

// Handle answers one admission request for a ClusterObjectSet.
func (e *Externalizer) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	dryRun := ptr.Deref(req.DryRun, false)
	log := ctrl.LoggerFrom(ctx).WithValues("clusterObjectSet", klog.KRef("", req.Name), "operation", req.Operation, "dryRun", dryRun)
	ctx = ctrl.LoggerInto(ctx, log)
	resp, reason := e.handle(ctx, req, dryRun)
	if reason != "" {
		e.Metrics.Refusals.WithLabelValues(reason).Inc()
		log.Info("refused", "reason", reason, "message", responseMessage(resp))
	}
	if dryRun {
		e.Metrics.DryRuns.Inc()
	}
	e.Metrics.Latency.WithLabelValues("externalize", string(req.Operation)).Observe(time.Since(start).Seconds())
	return resp
}

// handle returns the response, and the refusal reason when it refuses.
func (e *Externalizer) handle(ctx context.Context, req admission.Request, dryRun bool) (admission.Response, string) {
	obj, specSize, err := externalize.DecodeCOS(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the ClusterObjectSet: %w", err)), RefusalBadRequest
	}
	var warnings []string
	switch req.Operation {
	case admissionv1.Create:
		if errs := e.Limits.Validate(ctx, func(l validation.Limits) field.ErrorList { return l.ValidateCreate(obj) }); len(errs) > 0 {
			return invalid(obj.Name, errs), RefusalInvalid
		}
		// The API server refuses a create of an existing name only after admission, and a
		// server-side apply that lost a create race is retried as an update: such a create is
		// answered as a dry run is, the same refs and nothing written.
		exists, err := e.exists(ctx, obj.Name)
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, err), RefusalWriteFailed
		}
		if exists && !dryRun {
			dryRun = true
			warnings = append(warnings, fmt.Sprintf("%sClusterObjectSet %s already exists: this create writes no Secrets", warningPrefix, obj.Name))
		}
	case admissionv1.Update:
		old, _, err := externalize.DecodeCOS(req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored ClusterObjectSet: %w", err)), RefusalBadRequest
		}
		restored, warning := e.restoreStoredPhases(ctx, old, obj, dryRun)
		if warning != "" {
			warnings = append(warnings, warning)
		}
		if errs := e.Limits.Validate(ctx, func(l validation.Limits) field.ErrorList { return externalize.UpdateErrors(l, old, obj) }); len(errs) > 0 {
			return invalid(obj.Name, errs).WithWarnings(warnings...), RefusalInvalid
		}
		if restored || len(old.Spec.Phases) > 0 {
			// The stored content stands: only kubectl's annotation may need the stored form.
			return e.respond(obj, restored, warnings), ""
		}
	default:
		return admission.Allowed(""), ""
	}

	decision, ferr := externalize.Decide(e.Options.Mode, e.Options.Threshold, obj.Annotations, specSize, externalize.CountInline(obj.Spec.Phases))
	if ferr != nil {
		return invalid(obj.Name, field.ErrorList{ferr}), RefusalInvalid
	}
	warnings = append(warnings, e.checkUserRefs(ctx, obj)...)
	if !decision.Externalize {
		return e.respond(obj, false, warnings), ""
	}
	if obj.Name == "" {
		return invalid("", field.ErrorList{field.Required(field.NewPath("metadata", "name"),
			"a ClusterObjectSet whose objects are externalized needs a name: generateName is not supported")}), RefusalNameRequired
	}
	plan, err := content.PlanFor(obj.Name, externalize.PlanInput(obj), content.Options{})
	if err != nil {
		var tooLarge *content.TooLargeError
		if errors.As(err, &tooLarge) {
			return invalid(obj.Name, field.ErrorList{externalize.TooLargeFieldError(tooLarge)}), RefusalTooLarge
		}
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("planning the Secrets: %w", err)), RefusalBadRequest
	}
	written, resp, reason := e.writeSecrets(ctx, obj.Name, plan, dryRun)
	if reason != "" {
		return resp, reason
	}
	obj.Spec.Phases = externalize.WithRefs(obj.Spec.Phases, plan, e.Options.SystemNamespace)
	e.Metrics.ObjectsExternalized.Add(float64(plan.Stats.Objects))
	e.Metrics.BytesInline.Add(float64(plan.Stats.InlineBytes))
	e.Metrics.BytesStored.Add(float64(plan.Stats.StoredBytes))
	e.Metrics.SecretsWritten.Add(float64(written))
	what := fmt.Sprintf("externalized %s into %s in %s (%d bytes inline, %d bytes stored; %s)",
		plural(plan.Stats.Objects, "object"), plural(len(plan.Secrets), "Secret"), e.Options.SystemNamespace,
		plan.Stats.InlineBytes, plan.Stats.StoredBytes, decision.Reason)
	if dryRun {
		what += "; nothing written"
	}
	warnings = append(warnings, warningPrefix+what)
	ctrl.LoggerFrom(ctx).Info("externalized", "objects", plan.Stats.Objects, "secrets", len(plan.Secrets), "secretsCreated", written,
		"inlineBytes", plan.Stats.InlineBytes, "storedBytes", plan.Stats.StoredBytes)
	return e.respond(obj, true, warnings), ""
}

// exists reports whether a ClusterObjectSet of that name exists (read live).
func (e *Externalizer) exists(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, nil
	}
	err := e.Reader.Get(ctx, client.ObjectKey{Name: name}, &olmv1.ClusterObjectSet{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("checking whether ClusterObjectSet %s exists: %w", name, err)
	}
}

// writeSecrets creates the planned Secrets through the shared writer (objectdata.Writer), at most
// WriteConcurrency at once: an existing Secret of the same name is accepted only when it is ours and
// holds exactly the planned content. A dry run checks existing Secrets the same way and writes
// nothing. It returns the number created.
func (e *Externalizer) writeSecrets(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, admission.Response, string) {
	w := &objectdata.Writer{Client: e.Client, Reader: e.Reader, Namespace: e.Options.SystemNamespace, Concurrency: max(e.Options.WriteConcurrency, 1)}
	n, err := w.Write(ctx, cosName, plan, dryRun)
	if err != nil {
		var conflict *objectdata.ConflictError
		if errors.As(err, &conflict) {
			return 0, admission.Errored(http.StatusConflict, err), RefusalSecretConflict
		}
		return 0, admission.Errored(http.StatusInternalServerError, err), RefusalWriteFailed
	}
	return n, admission.Response{}, ""
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
