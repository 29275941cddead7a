package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkEmbedded validates the embedded resources below v (the inline objects): apiVersion and kind
// are required and well-formed, and metadata is valid object metadata. The API server applies these
// checks on update as on create: they do not ratchet.
func checkEmbedded(p *field.Path, v any, s *schema) field.ErrorList {
	return walk(p, v, s, func(p *field.Path, v any, s *schema) field.ErrorList {
		if x, ok := v.(map[string]any); ok && s.Embedded {
			return checkEmbeddedResource(p, x)
		}
		return nil
	})
}

func checkEmbeddedResource(p *field.Path, x map[string]any) field.ErrorList {
	var errs field.ErrorList
	if apiVersion, err := nonEmptyString(p, x, "apiVersion"); err != nil {
		errs = append(errs, err)
	} else if _, err := runtimeschema.ParseGroupVersion(apiVersion); err != nil {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), apiVersion, err.Error()))
	}

	if kind, err := nonEmptyString(p, x, "kind"); err != nil {
		errs = append(errs, err)
	} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("kind"), kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}

	if raw, ok := x["metadata"]; ok {
		meta, err := decodeObjectMeta(raw, true)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("metadata"), raw, err.Error()))
		} else {
			errs = append(errs, checkObjectMeta(p.Child("metadata"), meta)...)
		}
	}
	return errs
}

// nonEmptyString is x[key] when it is a non-empty string, else the error of an embedded resource's
// required string field: missing, not a string or empty.
func nonEmptyString(p *field.Path, x map[string]any, key string) (string, *field.Error) {
	v, ok := x[key]
	if !ok {
		return "", field.Required(p.Child(key), "")
	}
	s, isString := v.(string)
	switch {
	case !isString:
		return "", field.Invalid(p.Child(key), v, "must be a string")
	case s == "":
		return "", field.Invalid(p.Child(key), s, "must not be empty")
	}
	return s, nil
}

// checkObjectMeta validates the metadata of an inline object as kube-apiserver v1.36 does: an empty
// name is allowed (the API server puts a fake name in), names are path segments, and the namespace
// is checked when set.
//
// apimachinery's ValidateObjectMeta does most of it, but its checks of ownerReferences and
// managedFields changed after v1.36 (other error types, paths and messages, and Required and Unsupported
// errors would block the CEL stage). Those two are checked here as v1.36 does.
func checkObjectMeta(p *field.Path, meta *metav1.ObjectMeta) field.ErrorList {
	m := meta.DeepCopy()
	if m.Name == "" {
		m.Name = "fakename"
	}
	owners, managed := m.OwnerReferences, m.ManagedFields
	m.OwnerReferences, m.ManagedFields = nil, nil
	errs := apivalidation.ValidateObjectMeta(m, m.Namespace != "", pathSegmentName, p)
	errs = append(errs, checkOwnerReferences(p.Child("ownerReferences"), owners)...)
	errs = append(errs, checkManagedFields(p.Child("managedFields"), managed)...)
	for _, e := range errs {
		// apimachinery marks some of these with a bound's origin (a negative generation is
		// "minimum"): they are no bounds of the CRD, which BoundError must not take them for.
		if boundOrigins[e.Origin] {
			e.Origin = ""
		}
	}
	return errs
}

func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// checkOwnerReferences: every reference needs a version, kind, name and uid; Events cannot own; at
// most one reference is the controller. v1.36 reports all of it at the list's path.
func checkOwnerReferences(p *field.Path, refs []metav1.OwnerReference) field.ErrorList {
	var errs field.ErrorList
	firstController := ""
	for _, ref := range refs {
		gvk := runtimeschema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		if gvk.Version == "" {
			errs = append(errs, field.Invalid(p.Child("apiVersion"), ref.APIVersion, "version must not be empty"))
		}
		if gvk.Kind == "" {
			errs = append(errs, field.Invalid(p.Child("kind"), ref.Kind, "must not be empty"))
		}
		if ref.Name == "" {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, "must not be empty"))
		}
		if ref.UID == "" {
			errs = append(errs, field.Invalid(p.Child("uid"), ref.UID, "must not be empty"))
		}
		if gvk == (runtimeschema.GroupVersionKind{Version: "v1", Kind: "Event"}) {
			errs = append(errs, field.Invalid(p, ref, fmt.Sprintf("%s is disallowed from being an owner", gvk)))
		}
		if ref.Controller != nil && *ref.Controller {
			name := ref.Kind + "/" + ref.Name
			if firstController == "" {
				firstController = name
			} else {
				errs = append(errs, field.Invalid(p, refs, fmt.Sprintf(
					"Only one reference can have Controller set to true. Found \"true\" in references for %v and %v", firstController, name)))
			}
		}
	}
	return errs
}

// checkManagedFields is v1.36's check of managedFields entries.
func checkManagedFields(p *field.Path, entries []metav1.ManagedFieldsEntry) field.ErrorList {
	var errs field.ErrorList
	for i, e := range entries {
		ep := p.Index(i)
		if e.Operation != metav1.ManagedFieldsOperationApply && e.Operation != metav1.ManagedFieldsOperationUpdate {
			errs = append(errs, field.Invalid(ep.Child("operation"), e.Operation, "must be `Apply` or `Update`"))
		}
		if e.FieldsType != "" && e.FieldsType != "FieldsV1" {
			errs = append(errs, field.Invalid(ep.Child("fieldsType"), e.FieldsType, "must be `FieldsV1`"))
		}
		errs = append(errs, metav1validation.ValidateFieldManager(e.Manager, ep.Child("manager"))...)
		if len(e.Subresource) > metav1validation.MaxSubresourceNameLength {
			errs = append(errs, field.TooLong(ep.Child("subresource"), "", metav1validation.MaxSubresourceNameLength))
		}
	}
	return errs
}
