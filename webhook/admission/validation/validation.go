// Package validation is a pure validator for ClusterObjectSets: it reproduces every rule the CRD
// (config/crd/bases) makes the API server enforce, with the field paths and messages of
// kube-apiserver v1.36, so that an admission webhook can refuse, before it does any work, exactly what
// the API server would refuse afterwards, and say why in the same words.
//
// # What the API server does, and what is reproduced
//
// The API server validates the JSON a client sent, not a Go struct. The validator therefore first
// encodes the typed object as a client does (omitempty and omitzero decide which fields are absent;
// invalid UTF-8 becomes U+FFFD), and applies the API server's decoding steps: nulls of declared fields
// are dropped (a nil phase objects list is absent, not empty) and inline objects are coerced
// (apiVersion and kind must be strings, metadata must decode as ObjectMeta). A coercion failure is a
// 400 Bad Request from the API server, before validation; here it is the only error returned. The
// bodies of inline objects (all but apiVersion, kind and metadata), which no rule looks into, are not
// encoded but compared as their JSON forms would be, so that the cost of validation does not grow
// with their size (see wire.go).
//
// Validation then runs in the API server's two stages:
//
//  1. Schema: required fields, enums, string lengths (counted in characters), integer bounds and item
//     counts, as kube-openapi reports them; the embedded-resource checks of inline objects (apiVersion
//     and kind required and well-formed, metadata valid as v1.36 validates ObjectMeta); and unique
//     phase names (list-type=map).
//  2. CEL: every x-kubernetes-validations rule, including the transition rules of an update. If stage
//     1 found an error of type Required, NotSupported, TooLong, TooMany or TypeInvalid, the API server
//     does not run the rules and instead adds one error with a nil path (see Skipped); so does this
//     package.
//
// On update the API server ratchets: errors of values that did not change from the old object are
// dropped (except for transition rules and the embedded-resource checks), and phase names are not
// checked for uniqueness if the old object already repeated one. This is reproduced too, though it
// only matters for old objects the current CRD would refuse.
//
// # What is not covered
//
//   - metadata and TypeMeta of the ClusterObjectSet itself: the API server's generic checks (name
//     format, labels, annotations, immutable uid and name on update), not rules of this CRD.
//   - status: the API server drops it on create and keeps the old status on update of the main
//     resource, so status is never validated there. The rules on status.observedPhases (phases cannot
//     be added or removed once set, name, digest and completedAt immutable) only apply to the status
//     subresource, which this package does not validate.
//   - the CEL cost budget: the CRD's rules are cheap and cannot exhaust it.
//
// The errors come in a deterministic order; the API server's order is not defined.
//
// Running the API server's own code in process (k8s.io/apiextensions-apiserver) was measured against
// this package and not kept for the webhook: docs/design.md says why. The tests use it as an oracle
// (oracle_test.go): every corpus case, edge case and fuzz input goes through both, and the known
// differences are listed there and in docs/webhook.md. TestSchemaMatchesCRD compares schema.go with
// the generated CRD.
package validation

import (
	"errors"

	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// ValidateCreate validates a ClusterObjectSet being created.
func ValidateCreate(obj *olmv1.ClusterObjectSet) field.ErrorList {
	return validateCreate(obj, toWire, specSchema)
}

// ValidateUpdate validates an update from old to obj. On top of the rules of a create: revision and
// collisionProtection are immutable; phases are immutable once non-empty (an empty list may be filled
// once; a reordering of the same phases is not a change), and dropping a non-empty phases list is
// refused at path "spec"; an Archived ClusterObjectSet cannot return to Active.
//
// A nil old is a create. The rules of status.observedPhases are not checked (see the package
// documentation).
func ValidateUpdate(old, obj *olmv1.ClusterObjectSet) field.ErrorList {
	return validateUpdate(old, obj, toWire, specSchema)
}

// validateCreate and validateUpdate take the function that makes wire forms, so that tests can
// compare toWire with toWireWhole, and the schema of .spec (Bounds: the served bounds).
func validateCreate(obj *olmv1.ClusterObjectSet, wire wireFunc, s *schema) field.ErrorList {
	if obj == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("no ClusterObjectSet to validate"))}
	}
	spec, errs := wire(&obj.Spec, true)
	if len(errs) > 0 {
		return errs
	}
	return validate(spec, nil, nil, s)
}

func validateUpdate(old, obj *olmv1.ClusterObjectSet, wire wireFunc, s *schema) field.ErrorList {
	if old == nil {
		return validateCreate(obj, wire, s)
	}
	if obj == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("no ClusterObjectSet to validate"))}
	}
	spec, errs := wire(&obj.Spec, true)
	if len(errs) > 0 {
		return errs
	}
	oldSpec, _ := wire(&old.Spec, false)
	return validate(spec, oldSpec, rootCorr(spec, oldSpec, s), s)
}

func validate(spec, oldSpec map[string]any, c *corr, s *schema) field.ErrorList {
	schemaStage := &checker{}
	schemaStage.checkSchema(specPath, spec, s, c)
	errs := schemaStage.errs
	errs = append(errs, checkEmbedded(specPath, spec, s)...)
	if c == nil || len(checkListMaps(specPath, oldSpec, s)) == 0 {
		errs = append(errs, checkListMaps(specPath, spec, s)...)
	}
	if blocking(errs) {
		return append(errs, Skipped())
	}
	celStage := &checker{}
	celStage.checkRules(specPath, spec, s, c)
	return append(errs, celStage.errs...)
}
