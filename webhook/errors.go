package webhook

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/inflight"
)

// cosGroupKind names ClusterObjectSets in the API server's errors.
var cosGroupKind = schema.GroupKind{Group: olmv1.GroupVersion.Group, Kind: olmv1.ClusterObjectSetKind}

// refusal is the response of a refusal (the pipeline's, or the in-flight bounds'): the API server's
// Invalid status for field errors, 429 TooManyRequests with a Retry-After for one to retry later,
// otherwise its error with its code.
func refusal(name string, r *cosadmission.Refusal) admission.Response {
	if len(r.Errs) > 0 {
		return invalid(name, r.Errs)
	}
	if r.Code == http.StatusTooManyRequests {
		resp := tooManyRequests(r.Err.Error())
		resp.Result.Details.RetryAfterSeconds = retryAfterOf(r.Err)
		return resp
	}
	return admission.Errored(r.Code, r.Err)
}

// busyRetryAfter is the Retry-After every refusal to retry later asks for unless its error says
// when (inflight.RetryAfter): the API server sets the header from it, and client-go's clients
// (kubectl, controllers) then retry by themselves.
const busyRetryAfter = 1

// retryAfterOf is the Retry-After a refusal for err asks for, in whole seconds: when there should
// be room, or busyRetryAfter.
func retryAfterOf(err error) int32 {
	if d := inflight.RetryAfter(err); d > 0 {
		return int32(max(d/time.Second, 1))
	}
	return busyRetryAfter
}

// tooManyRequests is the response of every refusal to retry later (no room in the admission pool,
// no time before the call's deadline, the unreferenced bound): 429 TooManyRequests with a
// Retry-After.
func tooManyRequests(msg string) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: msg,
		Details: &metav1.StatusDetails{RetryAfterSeconds: busyRetryAfter},
	}}}
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
