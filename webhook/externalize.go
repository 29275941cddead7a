// Package webhook serves the admission webhooks of cos-externalizer: the mutating webhook that moves
// the inline objects of ClusterObjectSets into immutable, content-addressed Secrets, the validating
// webhook that checks the final object, and the guard that keeps referenced Secrets from being
// deleted. The decisions are pure functions of internal/externalize, internal/content and
// internal/validation; this package reads, calls them and writes.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/externalize"
	"github.com/cos-externalizer/cos-externalizer/objectdata"
)

// Paths the webhooks are served on.
const (
	MutatePath        = "/mutate-olm-operatorframework-io-v1-clusterobjectset"
	ValidatePath      = "/validate-olm-operatorframework-io-v1-clusterobjectset"
	SecretGuardPath   = "/validate-v1-secret-object-data"
	warningPrefix     = "cos-externalizer: "
	defaultConcurrent = objectdata.DefaultConcurrency
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

var cosGroupKind = schema.GroupKind{Group: olmv1.GroupVersion.Group, Kind: olmv1.ClusterObjectSetKind}

// Options configure the webhooks.
type Options struct {
	// SystemNamespace holds the object-data Secrets.
	SystemNamespace string
	// Mode and Threshold are the externalization policy.
	Mode      externalize.Mode
	Threshold int
	// MaxStoredBytes is the largest stored ClusterObjectSet the validating webhook lets through.
	MaxStoredBytes int
	// WriteConcurrency bounds the Secrets written at once.
	WriteConcurrency int
	// ExemptUsers may delete, or change the label and owners of, referenced object-data Secrets (by
	// default the namespace controller; Setup adds the manager itself).
	ExemptUsers []string
	// MaxResolvedBytes caps the total resolved content of the refs of one ClusterObjectSet that an
	// update is compared with (--max-resolved-bytes); 0 means content.DefaultMaxResolvedBytes.
	MaxResolvedBytes int64
}

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
		if errs := e.Limits.Get(ctx).ValidateCreate(obj); len(errs) > 0 {
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
		restored, warning := e.restoreStoredPhases(ctx, old, obj)
		if warning != "" {
			warnings = append(warnings, warning)
		}
		if errs := externalize.UpdateErrors(e.Limits.Get(ctx), old, obj); len(errs) > 0 {
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

// checkUserRefs warns about refs given by the user that name a Secret or key that does not exist.
func (e *Externalizer) checkUserRefs(ctx context.Context, obj *olmv1.ClusterObjectSet) []string {
	var warnings []string
	secrets := map[client.ObjectKey]*corev1.Secret{}
	for i, p := range obj.Spec.Phases {
		for j, o := range p.Objects {
			if o.Object.Object != nil {
				continue
			}
			key := client.ObjectKey{Namespace: o.Ref.NamespaceOr(e.Options.SystemNamespace), Name: o.Ref.Name}
			sec, seen := secrets[key]
			if !seen {
				sec = &corev1.Secret{}
				if err := e.Reader.Get(ctx, key, sec); err != nil {
					sec = nil
					if !apierrors.IsNotFound(err) {
						ctrl.LoggerFrom(ctx).Info("could not check a ref", "secret", key.String(), "error", err.Error())
						continue
					}
				}
				secrets[key] = sec
			}
			path := field.NewPath("spec", "phases").Index(i).Child("objects").Index(j).Child("ref")
			switch {
			case sec == nil:
				warnings = append(warnings, fmt.Sprintf("%s%s: Secret %s does not exist (yet)", warningPrefix, path, key))
			case sec.Data[o.Ref.Key] == nil:
				warnings = append(warnings, fmt.Sprintf("%s%s: Secret %s has no key %q", warningPrefix, path, key, o.Ref.Key))
			}
		}
	}
	return warnings
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

// respond allows the request, replacing spec.phases when they changed, and kubectl's last-applied
// annotation when it is too large to keep inline.
func (e *Externalizer) respond(obj *olmv1.ClusterObjectSet, phasesChanged bool, warnings []string) admission.Response {
	var ops []jsonpatch.JsonPatchOperation
	if phasesChanged {
		ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "add", Path: "/spec/phases", Value: obj.Spec.Phases})
	}
	if v, ok := obj.Annotations[externalize.LastAppliedAnnotation]; ok && len(v) > e.Options.Threshold && hasRefs(obj.Spec.Phases) {
		if rewritten, err := externalize.RewriteLastApplied(v, obj.Spec.Phases); err == nil && rewritten != v {
			ops = append(ops, jsonpatch.JsonPatchOperation{
				Operation: "add",
				Path:      "/metadata/annotations/" + strings.ReplaceAll(externalize.LastAppliedAnnotation, "/", "~1"),
				Value:     rewritten,
			})
		}
	}
	resp := admission.Allowed("")
	if len(ops) > 0 {
		resp = admission.Patched("", ops...)
	}
	return resp.WithWarnings(warnings...)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func hasRefs(phases []olmv1.ClusterObjectSetPhase) bool {
	for _, p := range phases {
		for _, o := range p.Objects {
			if o.Object.Object == nil {
				return true
			}
		}
	}
	return false
}

// invalid refuses with the API server's own Invalid status, field paths in its causes.
func invalid(name string, errs field.ErrorList) admission.Response {
	status := invalidError(name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}

// invalidError is the API server's Invalid error for a ClusterObjectSet.
func invalidError(name string, errs field.ErrorList) *apierrors.StatusError {
	return apierrors.NewInvalid(cosGroupKind, name, errs)
}

func responseMessage(r admission.Response) string {
	if r.Result != nil {
		return r.Result.Message
	}
	return ""
}
