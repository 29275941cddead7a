package controllers

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// maxMessage caps condition and Event messages.
const maxMessage = 1024

// safeError describes an API error without the values it may quote: the API server's validation
// messages can echo fields of the object sent, and those come from Secrets whose content must never
// reach a condition, an Event or a log line. Only the reason, the HTTP code and the field paths with
// their error types are kept.
type safeError struct {
	msg string
	err error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.err }

func sanitize(err error) error {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return err
	}
	s := status.Status()
	msg := fmt.Sprintf("the API server refused it: %s (%d)", s.Reason, s.Code)
	if s.Details != nil && len(s.Details.Causes) > 0 {
		var fields []string
		for _, c := range s.Details.Causes {
			fields = append(fields, fmt.Sprintf("%s: %s", c.Field, c.Type))
		}
		msg += ": " + strings.Join(fields, ", ")
	}
	return &safeError{msg: msg, err: err}
}

// truncate caps a message at maxMessage bytes.
func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}
