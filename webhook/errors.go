package webhook

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	cosadmission "github.com/cos-externalizer/cos-externalizer/internal/admission"
)

// cosGroupKind names ClusterObjectSets in the API server's errors.
var cosGroupKind = schema.GroupKind{Group: olmv1.GroupVersion.Group, Kind: olmv1.ClusterObjectSetKind}

// refusal is the response of the pipeline's refusal: the API server's Invalid status for field
// errors, otherwise its error with its code.
func refusal(name string, r *cosadmission.Refusal) admission.Response {
	if len(r.Errs) > 0 {
		return invalid(name, r.Errs)
	}
	if r.Reason == cosadmission.ReasonUnreferenced || r.Reason == cosadmission.ReasonDeadline {
		resp := tooManyRequests(r.Err.Error()) // limits.go
		resp.Result.Details.RetryAfterSeconds = retryAfterOf(r.Err)
		return resp
	}
	return admission.Errored(r.Code, r.Err)
}

// canceled is the answer to a request whose context ended (its caller gone, its call's deadline
// passed) before it was done: no one reads it.
func canceled(ctx context.Context) admission.Response {
	return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("stopped before it was done: %w", context.Cause(ctx)))
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

// responseMessage is the message of a response, for the log.
func responseMessage(r admission.Response) string {
	if r.Result != nil {
		return r.Result.Message
	}
	return ""
}
