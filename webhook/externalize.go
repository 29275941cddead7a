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
	"reflect"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/externalize"
)

// Paths the webhooks are served on.
const (
	MutatePath        = "/mutate-olm-operatorframework-io-v1-clusterobjectset"
	ValidatePath      = "/validate-olm-operatorframework-io-v1-clusterobjectset"
	SecretGuardPath   = "/validate-v1-secret-object-data"
	warningPrefix     = "cos-externalizer: "
	defaultConcurrent = 4
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
	obj, specSize, err := decodeCOS(req.Object.Raw)
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
		old, _, err := decodeCOS(req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored ClusterObjectSet: %w", err)), RefusalBadRequest
		}
		restored, warning := e.restoreStoredPhases(ctx, old, obj)
		if warning != "" {
			warnings = append(warnings, warning)
		}
		if errs := updateErrors(e.Limits.Get(ctx), old, obj); len(errs) > 0 {
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
	plan, err := content.PlanFor(obj.Name, planInput(obj), content.Options{})
	if err != nil {
		var tooLarge *content.TooLargeError
		if errors.As(err, &tooLarge) {
			ferr := field.TooLong(field.NewPath("spec", "phases").Index(tooLarge.PhaseIndex).Child("objects").Index(tooLarge.Index), "", tooLarge.Budget)
			ferr.Detail = tooLarge.Error()
			return invalid(obj.Name, field.ErrorList{ferr}), RefusalTooLarge
		}
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("planning the Secrets: %w", err)), RefusalBadRequest
	}
	written, resp, reason := e.writeSecrets(ctx, obj.Name, plan, dryRun)
	if reason != "" {
		return resp, reason
	}
	obj.Spec.Phases = withRefs(obj.Spec.Phases, plan, e.Options.SystemNamespace)
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
// one request share a budget of Options.MaxResolvedBytes (content.Budget): each Secret key is read
// and decoded once, and every ref to it gets the same object, which SameContent only reads. Past the
// budget, an error wrapping content.ErrBudgetExceeded.
func (e *Externalizer) resolver(ctx context.Context) externalize.ResolveFunc {
	cache := map[client.ObjectKey]*corev1.Secret{}
	budget := content.NewBudget(e.Options.MaxResolvedBytes)
	return func(ref olmv1.ObjectSourceRef) (map[string]any, error) {
		key := client.ObjectKey{Namespace: ref.NamespaceOr(e.Options.SystemNamespace), Name: ref.Name}
		sec, ok := cache[key]
		if !ok {
			sec = &corev1.Secret{}
			if err := e.Reader.Get(ctx, key, sec); err != nil {
				return nil, fmt.Errorf("reading Secret %s: %w", key, err)
			}
			cache[key] = sec
		}
		data, ok := sec.Data[ref.Key]
		if !ok {
			return nil, fmt.Errorf("secret %s has no key %q", key, ref.Key)
		}
		obj, err := budget.Resolve(key.String()+"/"+ref.Key, data, ref.Key)
		if errors.Is(err, content.ErrBudgetExceeded) {
			return nil, fmt.Errorf("%w (the limit is --max-resolved-bytes)", err)
		}
		if err != nil {
			return nil, fmt.Errorf("secret %s key %q: %w", key, ref.Key, err)
		}
		return obj, nil
	}
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

// writeSecrets creates the planned Secrets, at most WriteConcurrency at once. An existing Secret of
// the same name is accepted only when it is ours and holds exactly the planned content. A dry run
// checks existing Secrets the same way and writes nothing. It returns the number created.
func (e *Externalizer) writeSecrets(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, admission.Response, string) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(e.Options.WriteConcurrency, 1))
	created := make([]bool, len(plan.Secrets))
	for i, s := range plan.Secrets {
		want := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      s.Name,
				Namespace: e.Options.SystemNamespace,
				Labels:    map[string]string{olmv1.LabelRevisionName: content.RevisionLabelValue(cosName)},
			},
			Type:      olmv1.SecretTypeObjectData,
			Immutable: ptr.To(true),
			Data:      s.Data,
		}
		g.Go(func() error {
			if dryRun {
				_, err := e.checkExisting(gctx, want, true)
				return err
			}
			var err error
			created[i], err = e.createOrReuse(gctx, want)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		var conflict *conflictError
		if errors.As(err, &conflict) {
			return 0, admission.Errored(http.StatusConflict, err), RefusalSecretConflict
		}
		return 0, admission.Errored(http.StatusInternalServerError, err), RefusalWriteFailed
	}
	n := 0
	for _, c := range created {
		if c {
			n++
		}
	}
	return n, admission.Response{}, ""
}

const (
	// reuseAttempts bounds how often a Secret that vanishes or changes between reading and touching
	// it (the sweep deleted it, another request touched it) is created or checked again.
	reuseAttempts = 5
	// recentUse is how old a last-used time may be and still spare a touch: concurrent requests
	// reusing one Secret touch it once.
	recentUse = 10 * time.Second
)

// createOrReuse creates the Secret, or reuses an existing one that holds exactly the wanted content.
// A reused Secret gets the time of this request in its last-used annotation, guarded by the
// resourceVersion it was checked at: the orphan sweep deletes only the version it judged, so either
// the sweep deleted it first and it is created again here, or the touch came first and the sweep
// leaves it. It reports whether it created the Secret.
func (e *Externalizer) createOrReuse(ctx context.Context, want *corev1.Secret) (bool, error) {
	key := client.ObjectKeyFromObject(want)
	var err error
	for range reuseAttempts {
		err = e.Client.Create(ctx, want.DeepCopy())
		if err == nil {
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, &writeError{secret: key, err: err}
		}
		var got *corev1.Secret
		if got, err = e.checkExisting(ctx, want, false); err != nil {
			var conflict *conflictError
			if errors.As(err, &conflict) || !apierrors.IsNotFound(err) {
				return false, err
			}
			continue // deleted since the create: create it again
		}
		live, err := e.liveOwners(ctx, got.OwnerReferences)
		if err != nil {
			return false, &writeError{secret: key, err: err}
		}
		now := time.Now()
		if used, ok := content.LastUsed(got.Annotations); ok && now.Sub(used) < recentUse && len(live) == len(got.OwnerReferences) {
			return false, nil // touched a moment ago (by a concurrent request): its grace has just begun
		}
		patch := client.MergeFromWithOptions(got.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[content.LastUsedAnnotation] = content.LastUsedValue(now)
		// An owner that is gone or being deleted (a ClusterObjectSet deleted and now re-created, or
		// restored) would have the garbage collector delete the Secret this request is about to
		// reference: drop it. The new ClusterObjectSet's reconciler takes ownership; if it never
		// appears, the orphan sweep deletes the Secret after its grace period.
		got.OwnerReferences = live
		if err = e.Client.Patch(ctx, got, patch); err == nil {
			return false, nil
		}
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, &writeError{secret: key, err: err}
		}
	}
	return false, &writeError{secret: key, err: fmt.Errorf("it changed or vanished %d times while being reused: %w", reuseAttempts, err)}
}

// liveOwners returns the owner references that point at something other than a ClusterObjectSet, or
// at a ClusterObjectSet that exists with that uid and is not being deleted (read uncached).
func (e *Externalizer) liveOwners(ctx context.Context, refs []metav1.OwnerReference) ([]metav1.OwnerReference, error) {
	var live []metav1.OwnerReference
	for _, ref := range refs {
		if !collision.IsClusterObjectSetRef(ref) {
			live = append(live, ref)
			continue
		}
		owner := &olmv1.ClusterObjectSet{}
		err := e.Reader.Get(ctx, client.ObjectKey{Name: ref.Name}, owner)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading its owner ClusterObjectSet %s: %w", ref.Name, err)
		case owner.UID == ref.UID && owner.DeletionTimestamp.IsZero():
			live = append(live, ref)
		}
	}
	return live, nil
}

// checkExisting accepts an existing Secret only when it is one of ours with exactly the wanted
// content, and returns it. On a dry run a missing Secret is fine: the real request would create it.
func (e *Externalizer) checkExisting(ctx context.Context, want *corev1.Secret, dryRun bool) (*corev1.Secret, error) {
	got := &corev1.Secret{}
	key := client.ObjectKeyFromObject(want)
	if err := e.Reader.Get(ctx, key, got); err != nil {
		if dryRun && apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, &writeError{secret: key, err: err}
	}
	var why []string
	if got.Type != want.Type {
		why = append(why, fmt.Sprintf("its type is %q", got.Type))
	}
	if !ptr.Deref(got.Immutable, false) {
		why = append(why, "it is not immutable")
	}
	if got.Labels[olmv1.LabelRevisionName] != want.Labels[olmv1.LabelRevisionName] {
		why = append(why, "it belongs to another ClusterObjectSet")
	}
	if !reflect.DeepEqual(got.Data, want.Data) {
		why = append(why, "its data differs from the content it must hold")
	}
	if len(why) > 0 {
		return nil, &conflictError{secret: key, why: strings.Join(why, ", ")}
	}
	return got, nil
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

// planInput turns the phases into the content planner's input: inline objects to externalize, refs
// kept as given.
func planInput(obj *olmv1.ClusterObjectSet) content.Input {
	in := content.Input{Phases: make([]content.PhaseInput, len(obj.Spec.Phases))}
	for i, p := range obj.Spec.Phases {
		pi := content.PhaseInput{Name: p.Name, Objects: make([]content.ObjectInput, len(p.Objects))}
		for j, o := range p.Objects {
			if o.Object.Object != nil {
				pi.Objects[j] = content.ObjectInput{Object: o.Object.Object}
			} else {
				pi.Objects[j] = content.ObjectInput{Keep: &content.RefOut{SecretName: o.Ref.Name, Key: o.Ref.Key}}
			}
		}
		in.Phases[i] = pi
	}
	return in
}

// withRefs returns phases with the inline objects replaced by the planned refs; refs given by the
// user stay as they were. phases itself is not changed.
func withRefs(phases []olmv1.ClusterObjectSetPhase, plan *content.Plan, systemNamespace string) []olmv1.ClusterObjectSetPhase {
	out := make([]olmv1.ClusterObjectSetPhase, len(phases))
	for i, p := range phases {
		objs := make([]olmv1.ClusterObjectSetObject, len(p.Objects))
		for j, o := range p.Objects {
			if o.Object.Object != nil {
				r := plan.Refs[i][j]
				o = olmv1.ClusterObjectSetObject{
					Ref:                 olmv1.ObjectSourceRef{Name: r.SecretName, Namespace: systemNamespace, Key: r.Key},
					CollisionProtection: o.CollisionProtection,
				}
			}
			objs[j] = o
		}
		p.Objects = objs
		out[i] = p
	}
	return out
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

// writeError is a failed Secret read or write.
type writeError struct {
	secret client.ObjectKey
	err    error
}

func (e *writeError) Error() string {
	return fmt.Sprintf("writing object-data Secret %s: %v", e.secret, e.err)
}
func (e *writeError) Unwrap() error { return e.err }

// conflictError is an existing Secret under a name we need that is not exactly ours.
type conflictError struct {
	secret client.ObjectKey
	why    string
}

func (e *conflictError) Error() string {
	return fmt.Sprintf("secret %s already exists and cannot be used: %s; delete it or rename the ClusterObjectSet", e.secret, e.why)
}
