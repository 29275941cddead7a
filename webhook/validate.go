package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/validation"
)

// The validating webhook: the invariants again on the final object, since other mutating webhooks
// may run after ours, and the size of the stored form. Its matchConditions are in
// config/webhook/matchconditions.yaml.
// +kubebuilder:webhook:path=/validate-olm-operatorframework-io-v1-clusterobjectset,mutating=false,failurePolicy=fail,sideEffects=None,groups=olm.operatorframework.io,resources=clusterobjectsets,verbs=create;update,versions=v1,name=validate.cos-externalizer.io,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhookconfiguration:mutating=false,name=cos-externalizer

// DefaultMaxStoredBytes is the largest ClusterObjectSet the validating webhook lets through: etcd's
// default request limit (1.5 MiB) less room for metadata the API server adds (managedFields).
const DefaultMaxStoredBytes = 1536*1024 - 64*1024

// Validator is the validating webhook for ClusterObjectSets.
type Validator struct {
	Options Options
	Metrics *Metrics
	// Bounds are the served CRD's bounds; nil: the generated CRD's.
	Bounds *ServedBounds
}

var _ admission.Validator[*olmv1.ClusterObjectSet] = &Validator{}

// ValidateCreate checks a ClusterObjectSet being created.
func (v *Validator) ValidateCreate(ctx context.Context, obj *olmv1.ClusterObjectSet) (admission.Warnings, error) {
	defer v.observe("CREATE", time.Now())
	return nil, v.refuse(obj, v.Bounds.Validate(ctx, func(b validation.Bounds) field.ErrorList { return b.ValidateCreate(obj) }))
}

// ValidateUpdate checks an update.
func (v *Validator) ValidateUpdate(ctx context.Context, old, obj *olmv1.ClusterObjectSet) (admission.Warnings, error) {
	defer v.observe("UPDATE", time.Now())
	return nil, v.refuse(obj, v.Bounds.Validate(ctx, func(b validation.Bounds) field.ErrorList { return cosadmission.UpdateErrors(b, old, obj) }))
}

// ValidateDelete allows every delete; the webhook is not registered for them.
func (v *Validator) ValidateDelete(context.Context, *olmv1.ClusterObjectSet) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator) observe(op string, start time.Time) {
	v.Metrics.Latency.WithLabelValues("validate", op).Observe(time.Since(start).Seconds())
}

// refuse returns the Invalid error for errs, adding a size error when the stored form is too large.
func (v *Validator) refuse(obj *olmv1.ClusterObjectSet, errs field.ErrorList) error {
	reason := cosadmission.ReasonInvalid
	if len(errs) == 0 {
		if ferr := v.checkSize(obj); ferr != nil {
			errs = append(errs, ferr)
			reason = cosadmission.ReasonTooLarge
		}
	}
	if len(errs) == 0 {
		return nil
	}
	v.Metrics.Refusals.WithLabelValues(string(reason)).Inc()
	return invalidError(obj.Name, errs)
}

// checkSize refuses a stored form the API server's storage would refuse, saying why its inline
// objects were not externalized.
func (v *Validator) checkSize(obj *olmv1.ClusterObjectSet) *field.Error {
	b, err := json.Marshal(obj)
	if err != nil {
		// It was decoded from JSON, so it encodes; should it not, the API server cannot store it either.
		return field.InternalError(field.NewPath("spec"), fmt.Errorf("encoding the ClusterObjectSet to measure it: %w", err))
	}
	if len(b) <= v.Options.MaxStoredBytes {
		return nil
	}
	specBytes, _ := json.Marshal(obj.Spec)
	decision, _ := cosadmission.Decide(v.Options.Mode, v.Options.Threshold, obj.Annotations, len(specBytes), cosadmission.CountInline(obj.Spec.Phases))
	ferr := field.TooLong(field.NewPath("spec", "phases"), "", v.Options.MaxStoredBytes)
	ferr.Detail = fmt.Sprintf("the ClusterObjectSet would be stored as %d bytes, over the %d bytes the API server's storage (etcd) accepts; its %d inline objects were not externalized: %s; set the annotation %s=always to store them in Secrets",
		len(b), v.Options.MaxStoredBytes, cosadmission.CountInline(obj.Spec.Phases), decision.Reason, cosadmission.Annotation)
	return ferr
}

// charging charges each request that h decodes (the validating webhook's decoder decodes the object
// and the old object whole) before h sees it, as the mutating webhook does, and releases it after:
// no room, or no time before the call's deadline, is the same quick 429 (inflight.Control).
func (o Options) charging(metrics *Metrics, h admission.Handler) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
			return h.Handle(ctx, req)
		}
		var oldRaw []byte
		if req.Operation == admissionv1.Update {
			oldRaw = req.OldObject.Raw
		}
		charged, refused := o.admit(ctx, metrics, req.Object.Raw, oldRaw)
		if refused != nil {
			resp := refusal(req.Name, refused)
			metrics.Refusals.WithLabelValues(string(refused.Reason)).Inc()
			ctrl.LoggerFrom(ctx).Info("refused", "clusterObjectSet", klog.KRef("", req.Name), "operation", req.Operation,
				"reason", refused.Reason, "message", responseMessage(resp))
			return resp
		}
		// It decodes and checks, and plans nothing: not the work its charge counts, so not measured.
		defer charged.Release()
		return h.Handle(ctx, req)
	})
}
