package validation

import (
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// boundDetail matches what follows "<field> in body should " in the Invalid errors of the bound
// checks (minimum, maximum, minItems, minLength), as kube-openapi words them.
var boundDetail = regexp.MustCompile(`^(?:be greater than or equal to -?[0-9]+|be less than or equal to -?[0-9]+|have at least [0-9]+ items|be at least [0-9]+ chars long)$`)

// BoundError reports whether e is the error of a bound check of the schema (minimum, maximum,
// minItems, maxItems, minLength, maxLength): an error that other bounds in the served CRD may lift
// or change. TooMany is maxItems; TooLong is maxLength, except the managedFields check of embedded
// objects, which is no bound of the CRD.
func BoundError(e *field.Error) bool {
	if e == nil {
		return false
	}
	switch e.Type {
	case field.ErrorTypeTooMany:
		return true
	case field.ErrorTypeTooLong:
		return !strings.Contains(e.Field, ".managedFields[")
	case field.ErrorTypeInvalid:
		rest, ok := strings.CutPrefix(e.Detail, e.Field+" in body should ")
		return ok && boundDetail.MatchString(rest)
	}
	return false
}

// BoundDependent reports whether a refusal with errs depends on the bounds validated with: one of
// its errors is a bound error. A webhook validating with bounds it read some time ago confirms such
// a refusal against the CRD read now before refusing; the other refusals stand whatever the served
// bounds (no rule reads a bound).
func BoundDependent(errs field.ErrorList) bool {
	for _, e := range errs {
		if BoundError(e) {
			return true
		}
	}
	return false
}
