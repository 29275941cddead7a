package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The origins (field.Error.Origin) of the errors of the bound checks: the JSON Schema keywords.
const (
	originMinimum   = "minimum"
	originMaximum   = "maximum"
	originMinItems  = "minItems"
	originMaxItems  = "maxItems"
	originMinLength = "minLength"
	originMaxLength = "maxLength"
)

// boundOrigins are those origins.
var boundOrigins = map[string]bool{
	originMinimum: true, originMaximum: true, originMinItems: true, originMaxItems: true, originMinLength: true, originMaxLength: true,
}

// BoundError reports whether e is the error of a bound check of the schema (minimum, maximum,
// minItems, maxItems, minLength, maxLength): an error that other bounds in the served CRD may lift
// or change. The schema checks mark these errors when they make them (their Origin is the bound's
// keyword); the checks of inline objects' metadata, whose bounds are no bounds of the CRD, clear the
// same origins apimachinery gives some of theirs (checkObjectMeta).
func BoundError(e *field.Error) bool {
	return e != nil && boundOrigins[e.Origin]
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
