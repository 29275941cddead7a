package webhook

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/inflight"
)

// The mutating webhook. sideEffects NoneOnDryRun: a dry run writes nothing and gets the same patch.
// The API server calls it only for ClusterObjectSets with inline objects and for updates that change
// stored phases (matchConditions), so that refs-only ones (what OLM writes, and its later updates)
// are admitted while the manager is down; the second entry, on the same handler, checks the refs of
// a refs-only create (warnings) when the manager is up and is ignored when it is not. The
// matchConditions of both are in config/webhook/matchconditions.yaml.
// +kubebuilder:webhook:path=/mutate-olm-operatorframework-io-v1-clusterobjectset,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=olm.operatorframework.io,resources=clusterobjectsets,verbs=create;update,versions=v1,name=externalize.cos-externalizer.io,admissionReviewVersions=v1,timeoutSeconds=15,reinvocationPolicy=IfNeeded
// +kubebuilder:webhook:path=/mutate-olm-operatorframework-io-v1-clusterobjectset,mutating=true,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups=olm.operatorframework.io,resources=clusterobjectsets,verbs=create;update,versions=v1,name=check-refs.cos-externalizer.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhookconfiguration:mutating=true,name=cos-externalizer

// +kubebuilder:rbac:groups="",namespace=olmv1-system,resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterobjectsets,verbs=get;list;watch

// Externalizer is the mutating webhook: it translates the admission pipeline's answer
// (webhook/admission) into a patch, warnings, a refusal and metrics.
type Externalizer struct {
	// Store reads and writes the object-data Secrets: Setup's objectdata.Writer, which reads
	// uncached (a Secret written a moment ago is seen); tests give their own.
	Store   cosadmission.Store
	Options Options
	Metrics *Metrics
	// Bounds are the served CRD's bounds; nil: the generated CRD's.
	Bounds *ServedBounds
}

// Handle answers one admission request for a ClusterObjectSet.
func (e *Externalizer) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	dryRun := ptr.Deref(req.DryRun, false)
	log := ctrl.LoggerFrom(ctx).WithValues("clusterObjectSet", klog.KRef("", req.Name), "operation", req.Operation, "dryRun", dryRun)
	ctx = ctrl.LoggerInto(ctx, log)
	resp, reason := e.handle(ctx, req, dryRun)
	if reason != "" {
		e.Metrics.Refusals.WithLabelValues(string(reason)).Inc()
		log.Info("refused", "reason", reason, "message", responseMessage(resp))
	}
	if dryRun {
		e.Metrics.DryRuns.Inc()
	}
	e.Metrics.Latency.WithLabelValues("externalize", string(req.Operation)).Observe(time.Since(start).Seconds())
	return resp
}

// handle returns the response, and the refusal reason when it refuses.
func (e *Externalizer) handle(ctx context.Context, req admission.Request, dryRun bool) (admission.Response, cosadmission.Reason) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed(""), ""
	}
	// Charged before it is decoded; the stored refs an update resolves draw from the same Budget.
	var oldRaw []byte
	if req.Operation == admissionv1.Update {
		oldRaw = req.OldObject.Raw
	}
	if cosadmission.StaleUpdate(cosadmission.Operation(req.Operation), oldRaw, req.Object.Raw) {
		// The API server answers this update 409 Conflict after mutating admission, whatever this
		// webhook answers: judged against a stored object it was not written against, it would be
		// refused where the client must see the Conflict it retries, or write Secrets for an update
		// never stored. Admitted as it is, nothing read or written, before it is charged.
		ctrl.LoggerFrom(ctx).V(1).Info("admitted a stale update as it is: the API server answers it 409 Conflict")
		return admission.Allowed(""), ""
	}
	charged, refused := e.Options.admit(ctx, e.Metrics, req.Object.Raw, oldRaw)
	if refused != nil {
		return refusal(req.Name, refused), refused.Reason
	}
	defer charged.Release()
	resp, reason := e.decide(ctx, req, dryRun, charged)
	if charged.Budget.Busy() && reason != cosadmission.ReasonBusy {
		// An update compared with its stored refs without room to resolve them all: its answer
		// would rest on a comparison not made. Nothing was written for it (Secrets are written
		// after the comparison, and only for content the comparison found the same).
		return refusal(req.Name, e.Options.InFlight.Busy("no room to resolve the stored refs this update is compared with")), cosadmission.ReasonBusy
	}
	return resp, reason
}

// decide answers a request once it is charged.
func (e *Externalizer) decide(ctx context.Context, req admission.Request, dryRun bool, charged *inflight.Charge) (admission.Response, cosadmission.Reason) {
	obj, specSize, err := cosadmission.DecodeCOS(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the ClusterObjectSet: %w", err)), cosadmission.ReasonBadRequest
	}
	if ctx.Err() != nil {
		// Its caller has gone, or the call's deadline passed, while it was decoded.
		return canceled(ctx), cosadmission.ReasonCanceled
	}
	in := cosadmission.Request{Operation: cosadmission.Operation(req.Operation), New: obj, SpecSize: specSize, DryRun: dryRun, Bounds: e.Bounds}
	if req.Operation == admissionv1.Update {
		if in.Old, _, err = cosadmission.DecodeCOS(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored ClusterObjectSet: %w", err)), cosadmission.ReasonBadRequest
		}
	}
	r := e.pipeline(charged).Admit(ctx, in)
	if r.Refusal != nil && r.Refusal.Reason == cosadmission.ReasonBusy {
		// No room to read a Secret it names: nothing was read past the room, nothing written.
		return refusal(obj.Name, e.Options.InFlight.Busy("no room to read the Secrets this ClusterObjectSet names")).WithWarnings(r.Warnings...), cosadmission.ReasonBusy
	}
	if r.Refusal != nil {
		return refusal(obj.Name, r.Refusal).WithWarnings(r.Warnings...), r.Refusal.Reason
	}
	warnings := r.Warnings
	s := r.Stats
	e.Metrics.SecretsWritten.Add(float64(s.Created))
	log := ctrl.LoggerFrom(ctx)
	if len(s.Healed) > 0 {
		log.Info("wrote again the Secrets of the stored refs", "secretsMissing", len(s.Healed), "secretsCreated", s.Created)
	}
	if s.Plan.Secrets > 0 {
		e.Metrics.ObjectsExternalized.Add(float64(s.Plan.Objects))
		e.Metrics.BytesInline.Add(float64(s.Plan.InlineBytes))
		e.Metrics.BytesStored.Add(float64(s.Plan.StoredBytes))
		var notes []string
		if s.DryRun {
			notes = append(notes, "nothing written")
		}
		warnings = append(warnings, cosadmission.WarningPrefix+s.Summary(e.Options.SystemNamespace, notes...))
		log.Info("externalized", "objects", s.Plan.Objects, "secrets", s.Plan.Secrets, "secretsCreated", s.Created,
			"inlineBytes", s.Plan.InlineBytes, "storedBytes", s.Plan.StoredBytes)
	}
	obj.Spec.Phases = r.Phases
	return e.respond(obj, r.PhasesChanged, warnings), ""
}

// pipeline is the admission pipeline of one request charged c, over Store: it draws from the
// request's Budget, and its writes are timed by the request's call.
func (e *Externalizer) pipeline(c *inflight.Charge) *cosadmission.Pipeline {
	store := e.Options.Unreferenced.Wrap(e.Store, e.Options.SystemNamespace)
	store = c.Writes(store)
	return &cosadmission.Pipeline{
		Store:           store,
		SystemNamespace: e.Options.SystemNamespace,
		Mode:            e.Options.Mode,
		Threshold:       e.Options.Threshold,
		Budget:          c.Budget,
	}
}
