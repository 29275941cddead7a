// Package admission is the one admission pipeline of ClusterObjectSets, shared by the mutating webhook
// and kubectl cos apply: validation with the served CRD's bounds, a create of an existing name,
// immutable phases and restoring the stored ones, the externalization policy, planning the Secrets
// (internal/content), writing them, and healing the Secrets of stored refs. It reads and writes
// only through Store, and answers with the phases to store, warnings, a refusal and stats; the front
// ends translate that answer (an admission patch and metrics, or the plugin's requests and output). It
// never puts Secret or object content in a warning or error.
//
// Its steps are pure functions the other front ends call too (the validating webhook, kubectl cos
// build, size, diff and inspect): the policy (policy.go: Decide), decoding a ClusterObjectSet as sent
// (decode.go: DecodeCOS), the plan's input and refs (plan.go), comparing submitted and stored content
// (compare.go: SameContent), the inline form (inline.go), kubectl's last-applied annotation
// (lastapplied.go) and the update rules (validate.go: UpdateErrors).
package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/validation"
)

// WarningPrefix starts every warning of the pipeline, so that both front ends print the same lines.
const WarningPrefix = "cos-externalizer: "

// Store is what the pipeline reads and writes. Reads must be uncached, so that a Secret written a
// moment ago is seen; a missing object is the API server's NotFound error. objectdata.Writer is one.
type Store interface {
	// GetClusterObjectSet reads the stored ClusterObjectSet of that name.
	GetClusterObjectSet(ctx context.Context, name string) (*olmv1.ClusterObjectSet, error)
	// GetSecret reads a Secret.
	GetSecret(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error)
	// Write creates the planned Secrets of the ClusterObjectSet cosName, or reuses existing ones that
	// are exactly ours; a dry run checks existing ones and writes nothing (objectdata.Writer.Write).
	// It returns how many it created; a Secret that is not ours is an *secretdata.ConflictError.
	Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error)
	// Touch drops, from the existing object-data Secrets among keys, owner references to
	// ClusterObjectSets that are gone, as a reuse does, so the garbage collector does not take them;
	// it writes nothing else, and nothing at all where there is nothing to drop. It returns the keys
	// it did not look at (missing, of another type, or outside the system namespace), without saying
	// which (objectdata.Writer.Touch).
	Touch(ctx context.Context, keys []types.NamespacedName) ([]types.NamespacedName, error)
}

// Bounds validates with the numeric bounds of the CRD the cluster serves (the webhook's
// ServedBounds).
type Bounds interface {
	Validate(ctx context.Context, validate func(validation.Bounds) field.ErrorList) field.ErrorList
}

// FixedBounds are the CRD's bounds read once (kubectl cos apply).
type FixedBounds validation.Bounds

// Validate validates with b.
func (b FixedBounds) Validate(_ context.Context, validate func(validation.Bounds) field.ErrorList) field.ErrorList {
	return validate(validation.Bounds(b))
}

// Operation is what the request does to the ClusterObjectSet.
type Operation string

// The operations the pipeline decides on; any other is admitted as it is.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
)

// Request is one ClusterObjectSet to admit.
type Request struct {
	Operation Operation
	// Old is the stored ClusterObjectSet of an update.
	Old *olmv1.ClusterObjectSet
	// New is the ClusterObjectSet as submitted (DecodeCOS); the pipeline does not change it.
	New *olmv1.ClusterObjectSet
	// SpecSize is the size of New's spec as sent, which the policy decides by.
	SpecSize int
	DryRun   bool
	// Bounds validate New; nil: the generated CRD's bounds.
	Bounds Bounds
}

// Reason says why a request was refused: the one vocabulary of refusals, of the pipeline and of the
// webhook around it, and the values of the reason label of the webhook's refusal metric
// (cos_externalizer_admission_refusals_total).
type Reason string

// Refusal reasons of the pipeline.
const (
	ReasonInvalid        Reason = "invalid"            // the object breaks an invariant of the API
	ReasonTooLarge       Reason = "too_large"          // an object, or the stored form, is over a size limit
	ReasonNameRequired   Reason = "name_required"      // generateName without a name cannot be externalized
	ReasonSecretConflict Reason = "secret_conflict"    // a Secret under our name holds other content
	ReasonWriteFailed    Reason = "write_failed"       // reading or writing a Secret or the stored COS failed
	ReasonInternal       Reason = "internal_error"     // planning failed for another reason: the webhook's fault, not the request's
	ReasonUnreferenced   Reason = "unreferenced_limit" // the Store refused to write now (ErrRetryLater: the unreferenced bound): nothing was written
	ReasonBusy           Reason = "busy"               // no room in the request's Budget, or in the admission pool, for it (429, retryable): nothing was written
	// ReasonDeadline: the request, with the work admitted ahead of it, could not be finished, or its
	// Secrets written (ErrTooLate), before the API server's deadline for its call (429, retryable):
	// nothing was written.
	ReasonDeadline Reason = "deadline"
	// ReasonCanceled: the request's context ended (its caller gone, its call's deadline passed)
	// before its work was done; nothing more was done, and nothing written unless a write was under
	// way (its Secrets go to the orphan sweep).
	ReasonCanceled Reason = "canceled"
)

// Refusal reasons of the webhook around the pipeline.
const (
	ReasonBadRequest  Reason = "bad_request"   // the admission request could not be decoded
	ReasonSecretInUse Reason = "secret_in_use" // deleting or taking a Secret a live ClusterObjectSet references (the Secret guard)
	// ReasonClientCertificate: the request's kept-alive connection presented a client certificate
	// the current --webhook-client-ca bundle no longer verifies (403; the connection is closed).
	ReasonClientCertificate Reason = "client_certificate"
)

// ErrRetryLater, wrapped by an error of Store.Write, says that the Store wrote nothing and refuses
// for now (a bound on what it holds): the request is refused with 429 Too Many Requests, to be
// retried.
var ErrRetryLater = errors.New("retry later")

// ErrTooLate, wrapped by an error of Store.Write, says that the Store wrote nothing because the
// writes could not be done before the deadline of the request's caller: the request is refused with
// 429 Too Many Requests, to be retried.
var ErrTooLate = errors.New("no time to write before the deadline")

// Refusal is why a request must not be admitted.
type Refusal struct {
	Reason Reason
	// Errs are the field errors of an Invalid refusal: the API server's Invalid status names them.
	Errs field.ErrorList
	// Err is the error of any other refusal; it names Secrets, never content.
	Err error
	// Code is the HTTP status of Err.
	Code int32
}

// Stats say what the pipeline did.
type Stats struct {
	// Decision is the externalization policy's decision; zero when the stored phases stand.
	Decision Decision
	// Plan sums up the Secrets planned for the externalized objects (Secrets 0: none).
	Plan content.Stats
	// Created is how many Secrets were created.
	Created int
	// Kept: an update whose stored phases stand (the submitted objects are their content).
	Kept bool
	// Healed names the Secrets of the stored refs that were missing and were written again (on a dry
	// run: would be).
	Healed []string
	// DryRun: nothing was written (a dry run, or a create of an existing name).
	DryRun bool
}

// Summary is the line that says what was externalized, with extra notes inside its parentheses.
func (s Stats) Summary(systemNamespace string, extra ...string) string {
	notes := append([]string{fmt.Sprintf("%d bytes inline, %d bytes stored", s.Plan.InlineBytes, s.Plan.StoredBytes), s.Decision.Reason}, extra...)
	return fmt.Sprintf("externalized %s into %s in %s (%s)", naming.Count(s.Plan.Objects, "object"), naming.Count(s.Plan.Secrets, "Secret"),
		systemNamespace, strings.Join(notes, "; "))
}

// Response is the pipeline's answer.
type Response struct {
	// Phases are the phases to store: New's, unless PhasesChanged.
	Phases []olmv1.ClusterObjectSetPhase
	// PhasesChanged: Phases are not New's (refs in place of inline objects, or the stored phases).
	PhasesChanged bool
	// Warnings start with WarningPrefix; a refusal keeps those found before it.
	Warnings []string
	// Refusal is nil when the request is admitted.
	Refusal *Refusal
	Stats   Stats
}

// Pipeline admits ClusterObjectSets.
type Pipeline struct {
	Store Store
	// SystemNamespace holds the object-data Secrets.
	SystemNamespace string
	// Mode and Threshold are the externalization policy (Decide).
	Mode      Mode
	Threshold int
	// Budget, when set, is the request's own memory (the webhook's, drawn from its admission pool):
	// every Secret the pipeline reads is charged to it while it is read (secretdata.ReadCost), and
	// the stored refs an update is compared with are resolved within it (secretdata.RequestResolver).
	// Its owner releases it. Nil: reads are not charged, and the stored refs get a budget of Resolve.
	Budget *content.Budget
	// Resolve bounds the resolved content of the stored refs an update is compared with when Budget
	// is nil (kubectl cos apply).
	Resolve secretdata.ResolveMemory
}

// Admit decides one request, writing the Secrets it needs unless it is a dry run. A refusal comes
// before any write, except a write that fails part way (its Secrets go to the orphan sweep).
func (p *Pipeline) Admit(ctx context.Context, req Request) Response {
	switch req.Operation {
	case Create:
		return p.create(ctx, req)
	case Update:
		return p.update(ctx, req)
	default:
		return Response{Phases: req.New.Spec.Phases}
	}
}

// create: the API server refuses a create of an existing name only after admission, and a
// server-side apply that lost a create race is retried as an update: such a create is answered as a
// dry run is, the same refs and nothing written.
func (p *Pipeline) create(ctx context.Context, req Request) Response {
	obj := req.New
	if errs := validate(ctx, req.Bounds, func(l validation.Bounds) field.ErrorList { return l.ValidateCreate(obj) }); len(errs) > 0 {
		return refused(nil, invalid(ReasonInvalid, errs))
	}
	dryRun, warnings := req.DryRun, []string(nil)
	if obj.Name != "" && !dryRun {
		_, err := p.Store.GetClusterObjectSet(ctx, obj.Name)
		switch {
		case err == nil:
			dryRun = true
			warnings = append(warnings, fmt.Sprintf("%sClusterObjectSet %s already exists: this create writes no Secrets", WarningPrefix, obj.Name))
		case !apierrors.IsNotFound(err):
			return refused(nil, &Refusal{Reason: ReasonWriteFailed, Code: http.StatusServiceUnavailable,
				Err: fmt.Errorf("checking whether ClusterObjectSet %s exists: %w", obj.Name, err)})
		}
	}
	return p.externalize(ctx, obj, req.SpecSize, dryRun, warnings)
}

// update: an update of a ClusterObjectSet without phases fills them once, as a create does; otherwise
// the stored phases stand when the submitted objects are their content, their Secrets healed when
// some are missing (heal), and other phases are refused: phases are immutable.
func (p *Pipeline) update(ctx context.Context, req Request) Response {
	old, obj := req.Old, req.New
	if len(old.Spec.Phases) == 0 {
		if errs := validate(ctx, req.Bounds, func(l validation.Bounds) field.ErrorList { return UpdateErrors(l, old, obj) }); len(errs) > 0 {
			return refused(nil, invalid(ReasonInvalid, errs))
		}
		return p.externalize(ctx, obj, req.SpecSize, req.DryRun, nil)
	}
	resp := Response{Phases: obj.Spec.Phases, Stats: Stats{DryRun: req.DryRun}}
	var h heal
	kept := apiequality.Semantic.DeepEqual(old.Spec.Phases, obj.Spec.Phases)
	if !kept {
		var warning string
		var r *Refusal
		if kept, h, warning, r = p.sameAsStored(ctx, old, obj); r != nil {
			return refused(nil, r)
		}
		if warning != "" {
			resp.Warnings = append(resp.Warnings, warning)
		}
		if kept {
			resp.Phases, resp.PhasesChanged = old.Spec.Phases, true
		}
	}
	checked := *obj
	checked.Spec.Phases = resp.Phases
	if errs := validate(ctx, req.Bounds, func(l validation.Bounds) field.ErrorList { return UpdateErrors(l, old, &checked) }); len(errs) > 0 {
		return refused(resp.Warnings, invalid(ReasonInvalid, errs))
	}
	resp.Stats.Kept = kept
	if h.plan == nil {
		return resp
	}
	n, err := p.Store.Write(ctx, obj.Name, h.plan, req.DryRun)
	if err != nil {
		return refused(resp.Warnings, writeRefusal(ctx, err))
	}
	resp.Stats.Created, resp.Stats.Healed = n, h.missing
	what := fmt.Sprintf("%s%s of the stored refs missing (%s): ", WarningPrefix, naming.Count(len(h.missing), "Secret"), strings.Join(h.missing, ", "))
	if req.DryRun {
		what += "the submitted objects are their content and would re-create them; nothing written"
	} else {
		what += "the submitted objects are their content: re-created " + naming.Count(n, "Secret")
	}
	resp.Warnings = append(resp.Warnings, what)
	return resp
}

// heal is the Secrets of the stored refs to write again: plan is nil when none is missing.
type heal struct {
	plan    *content.Plan
	missing []string
}

// sameAsStored reports whether the submitted phases of an update carry the stored content. First by
// plan: when the submitted objects, planned for this ClusterObjectSet, give exactly the stored refs,
// they are the stored content (content keys are SHA-256 of the content), whether the stored Secrets
// can be read or not; the planned Secrets that are missing, or not exactly ours, are to be written
// again (heal), so a re-apply of the same manifests restores Secrets someone deleted. Otherwise by
// resolving the stored refs and comparing canonical content (SameContent), so that a
// later release that plans differently never changes the refs of an existing ClusterObjectSet; when
// they cannot be read, a warning says so and the update is not the same.
func (p *Pipeline) sameAsStored(ctx context.Context, old, obj *olmv1.ClusterObjectSet) (bool, heal, string, *Refusal) {
	if obj.Name != "" && CountInline(obj.Spec.Phases) > 0 {
		plan, err := content.PlanForContext(ctx, obj.Name, PlanInput(obj), content.Options{})
		if ctx.Err() != nil {
			return false, heal{}, "", canceled(ctx)
		}
		if err == nil && apiequality.Semantic.DeepEqual(old.Spec.Phases, WithRefs(obj.Spec.Phases, plan, p.SystemNamespace)) {
			h, r := p.toHeal(ctx, obj.Name, plan)
			return true, h, "", r
		}
	}
	resolve := p.resolver(ctx)
	same, err := SameContent(old.Spec.Phases, obj.Spec.Phases, p.SystemNamespace, resolve)
	if err != nil {
		return false, heal{}, WarningPrefix + "could not compare the submitted phases with the stored ones: " + err.Error(), nil
	}
	return same, heal{}, "", nil
}

// toHeal reads the planned Secrets of the stored refs: the plan is to be written again when one is
// missing or not exactly ours (Write then refuses it as a conflict).
func (p *Pipeline) toHeal(ctx context.Context, cosName string, plan *content.Plan) (heal, *Refusal) {
	var h heal
	damaged := false
	for _, s := range plan.Secrets {
		want := secretdata.ObjectDataSecret(cosName, p.SystemNamespace, s)
		key := types.NamespacedName{Namespace: want.Namespace, Name: want.Name}
		var readErr error
		if err := p.charged(func() {
			got, err := p.Store.GetSecret(ctx, key)
			switch {
			case apierrors.IsNotFound(err):
				h.missing = append(h.missing, key.Name)
			case err != nil:
				readErr = err
			case len(secretdata.Unusable(got, want)) > 0:
				damaged = true
			}
		}); err != nil {
			return heal{}, busyRefusal(err)
		}
		if readErr != nil {
			return heal{}, writeRefusal(ctx, &secretdata.WriteError{Secret: key, Err: readErr})
		}
	}
	if len(h.missing) > 0 || damaged {
		h.plan = plan
	}
	return h, nil
}

// externalize applies the policy to a ClusterObjectSet being created (or filled once): plan, write
// and put refs in place of the inline objects.
func (p *Pipeline) externalize(ctx context.Context, obj *olmv1.ClusterObjectSet, specSize int, dryRun bool, warnings []string) Response {
	decision, ferr := Decide(p.Mode, p.Threshold, obj.Annotations, specSize, CountInline(obj.Spec.Phases))
	if ferr != nil {
		return refused(warnings, invalid(ReasonInvalid, field.ErrorList{ferr}))
	}
	checked, r := p.checkUserRefs(ctx, obj)
	warnings = append(warnings, checked...)
	if r != nil {
		return refused(warnings, r)
	}
	if !dryRun {
		if err := p.touchUserRefs(ctx, obj); err != nil {
			return refused(warnings, &Refusal{Reason: ReasonWriteFailed, Code: http.StatusServiceUnavailable, Err: err})
		}
	}
	resp := Response{Phases: obj.Spec.Phases, Warnings: warnings, Stats: Stats{Decision: decision, DryRun: dryRun}}
	if !decision.Externalize {
		return resp
	}
	if obj.Name == "" {
		return refused(warnings, invalid(ReasonNameRequired, field.ErrorList{field.Required(field.NewPath("metadata", "name"),
			"a ClusterObjectSet whose objects are externalized needs a name: generateName is not supported")}))
	}
	plan, err := content.PlanForContext(ctx, obj.Name, PlanInput(obj), content.Options{})
	if ctx.Err() != nil {
		return refused(warnings, canceled(ctx))
	}
	if err != nil {
		var tooLarge *content.TooLargeError
		if errors.As(err, &tooLarge) {
			return refused(warnings, invalid(ReasonTooLarge, field.ErrorList{TooLargeFieldError(tooLarge)}))
		}
		return refused(warnings, &Refusal{Reason: ReasonInternal, Code: http.StatusInternalServerError, Err: fmt.Errorf("planning the Secrets: %w", err)})
	}
	n, err := p.Store.Write(ctx, obj.Name, plan, dryRun)
	if err != nil {
		return refused(warnings, writeRefusal(ctx, err))
	}
	resp.Phases, resp.PhasesChanged = WithRefs(obj.Spec.Phases, plan, p.SystemNamespace), true
	resp.Stats.Plan, resp.Stats.Created = plan.Stats, n
	return resp
}

// checkUserRefs warns about refs given by the user that name a Secret or key that does not exist.
// Only object-data Secrets of the system namespace are read (getObjectData): a ref outside it is
// reported as not checked, without reading it, and a Secret of another type reads as missing, so the
// warnings say nothing about a Secret the request did not submit beyond what its name and type
// already tell. A Secret that cannot be read is not warned about.
//
// Each Secret is read once, however many refs name it, and one at a time: charged to the request's
// Budget before it is read (charged), checked for the keys its refs name, and dropped. No room in the
// Budget refuses the request (ReasonBusy, 429) before anything is written.
func (p *Pipeline) checkUserRefs(ctx context.Context, obj *olmv1.ClusterObjectSet) ([]string, *Refusal) {
	type refAt struct {
		path    *field.Path
		secret  types.NamespacedName
		dataKey string
	}
	var refs []refAt
	// The data keys the refs name, by Secret, in the order the Secrets are first named: names only.
	named := map[types.NamespacedName]map[string]bool{}
	var order []types.NamespacedName
	for i, ph := range obj.Spec.Phases {
		for j, o := range ph.Objects {
			if !o.IsRef() {
				continue
			}
			key := types.NamespacedName{Namespace: o.Ref.NamespaceOr(p.SystemNamespace), Name: o.Ref.Name}
			refs = append(refs, refAt{path: field.NewPath("spec", "phases").Index(i).Child("objects").Index(j).Child("ref"), secret: key, dataKey: o.Ref.Key})
			if key.Namespace != p.SystemNamespace {
				continue
			}
			if named[key] == nil {
				named[key] = map[string]bool{}
				order = append(order, key)
			}
			named[key][o.Ref.Key] = true
		}
	}
	// What each Secret read showed: whether it could be read, exists, and which of the named keys it has.
	type found struct {
		read, exists bool
		has          map[string]bool
	}
	results := make(map[types.NamespacedName]found, len(order))
	for _, key := range order {
		var f found
		if err := p.charged(func() {
			sec, err := p.getObjectData(ctx, key)
			switch {
			case err == nil:
				f = found{read: true, exists: true, has: map[string]bool{}}
				for k := range named[key] {
					if sec.Data[k] != nil {
						f.has[k] = true
					}
				}
			case apierrors.IsNotFound(err):
				f = found{read: true}
			}
		}); err != nil {
			return nil, busyRefusal(err)
		}
		results[key] = f
	}
	var warnings []string
	outside := map[types.NamespacedName]bool{}
	for _, r := range refs {
		if r.secret.Namespace != p.SystemNamespace {
			if !outside[r.secret] {
				outside[r.secret] = true
				warnings = append(warnings, fmt.Sprintf("%s%s: Secret %s not checked: outside %s", WarningPrefix, r.path, r.secret, p.SystemNamespace))
			}
			continue
		}
		switch f := results[r.secret]; {
		case !f.read:
		case !f.exists:
			warnings = append(warnings, fmt.Sprintf("%s%s: Secret %s does not exist (yet)", WarningPrefix, r.path, r.secret))
		case !f.has[r.dataKey]:
			warnings = append(warnings, fmt.Sprintf("%s%s: Secret %s has no key %q", WarningPrefix, r.path, r.secret, r.dataKey))
		}
	}
	return warnings, nil
}

// resolver resolves the stored refs of an update: within the request's Budget, or a budget of
// Resolve.
func (p *Pipeline) resolver(ctx context.Context) secretdata.ResolveFunc {
	if p.Budget != nil {
		return secretdata.RequestResolver(ctx, p.Budget, p.getObjectData, p.SystemNamespace)
	}
	return secretdata.SecretResolver(ctx, p.Resolve, p.getObjectData, p.SystemNamespace)
}

// charged runs read, which reads one Secret and drops it before it returns, charged to the request's
// Budget (none: not charged): secretdata.ReadCost is held before the read, as a Secret's size is not
// known before it is read, and given back after it. A Budget that holds its request's room never
// waits for more: no room at once is a *content.WaitError (content.ErrBusy), and read does not run.
func (p *Pipeline) charged(read func()) error {
	b := p.Budget
	if b == nil {
		read()
		return nil
	}
	if err := b.Hold(secretdata.ReadCost); err != nil {
		return err
	}
	defer b.Unhold(secretdata.ReadCost)
	read()
	return nil
}

// busyRefusal refuses a request that found no room to read a Secret it names: 429, to be retried.
func busyRefusal(err error) *Refusal {
	return &Refusal{Reason: ReasonBusy, Code: http.StatusTooManyRequests, Err: fmt.Errorf("reading the Secrets this ClusterObjectSet names: %w", err)}
}

// touchUserRefs drops dead owner references from the object-data Secrets of the system namespace
// that the user's refs name (Store.Touch) before the ClusterObjectSet is stored, so that the garbage
// collector does not take content a refs-only create copies from a ClusterObjectSet that is gone (an
// orphan delete, then a re-create from the stored YAML; a GitOps wave). It is not what keeps content
// from the orphan sweep, and it may not run at all (the check-refs webhook fails open): the sweep
// copies what it deletes and restores what a live ClusterObjectSet references
// (controllers.OrphanSweeper). Missing Secrets are checkUserRefs' to warn about.
func (p *Pipeline) touchUserRefs(ctx context.Context, obj *olmv1.ClusterObjectSet) error {
	var keys []types.NamespacedName
	for _, key := range obj.ReferencedSecrets(p.SystemNamespace) {
		if key.Namespace == p.SystemNamespace {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := p.Store.Touch(ctx, keys); err != nil {
		return fmt.Errorf("writing the referenced Secrets before the ClusterObjectSet is stored: %w", err)
	}
	return nil
}

// errNotRead is why a ref outside the system namespace is not resolved.
type errNotRead struct{ systemNamespace string }

func (e errNotRead) Error() string {
	return "not read: only object-data Secrets in " + e.systemNamespace + " are"
}

// getObjectData is the only way the pipeline reads a Secret a request names (a user's ref, or the
// stored refs of an update, both taken from the request's body): a Secret outside the system
// namespace is never read (errNotRead), and one of another type than object-data is answered exactly
// as a missing one (the same NotFound error), so that no answer tells whether such a Secret exists,
// which keys it has or how long its values are. Content that the pipeline plans and writes itself is
// read by its own names (toHeal, Store.Write).
func (p *Pipeline) getObjectData(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	if key.Namespace != p.SystemNamespace {
		return nil, errNotRead{systemNamespace: p.SystemNamespace}
	}
	sec, err := p.Store.GetSecret(ctx, key)
	switch {
	case apierrors.IsNotFound(err):
		return nil, secretNotFound(key)
	case err != nil:
		return nil, err
	case sec.Type != olmv1.SecretTypeObjectData:
		return nil, secretNotFound(key)
	}
	return sec, nil
}

// secretNotFound is the one NotFound error of a Secret, whatever the store answered.
func secretNotFound(key types.NamespacedName) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
}

func invalid(reason Reason, errs field.ErrorList) *Refusal {
	return &Refusal{Reason: reason, Errs: errs, Code: http.StatusUnprocessableEntity}
}

// canceled refuses a request whose context has ended: its caller, the API server, no longer waits
// for the answer (503, as the API server's own answer to a call it gave up on).
func canceled(ctx context.Context) *Refusal {
	return &Refusal{Reason: ReasonCanceled, Code: http.StatusServiceUnavailable, Err: fmt.Errorf("stopped before it was done: %w", context.Cause(ctx))}
}

// writeRefusal refuses for a failed Store.Write (or a read of one of its Secrets) of a request on ctx.
func writeRefusal(ctx context.Context, err error) *Refusal {
	var conflict *secretdata.ConflictError
	switch {
	case errors.As(err, &conflict):
		return &Refusal{Reason: ReasonSecretConflict, Code: http.StatusConflict, Err: err}
	case errors.Is(err, ErrRetryLater):
		return &Refusal{Reason: ReasonUnreferenced, Code: http.StatusTooManyRequests, Err: err}
	case errors.Is(err, ErrTooLate):
		return &Refusal{Reason: ReasonDeadline, Code: http.StatusTooManyRequests, Err: err}
	case ctx.Err() != nil:
		// Failed because the request's context ended: no one waits for the answer.
		return canceled(ctx)
	}
	return &Refusal{Reason: ReasonWriteFailed, Code: http.StatusInternalServerError, Err: err}
}

func refused(warnings []string, r *Refusal) Response {
	return Response{Warnings: warnings, Refusal: r}
}
