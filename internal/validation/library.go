package validation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Library validates ClusterObjectSets with the API server's own code (k8s.io/apiextensions-apiserver),
// driven by a CRD: the structural schema, the OpenAPI validator with ratcheting, the checks of
// embedded resources and list-type=map lists, and the CEL rules, as the custom resource strategy
// runs them. It is the in-process alternative to the hand-written rules (issue 12), with the same
// function shape, so that the two can be compared (see TestLibraryAgreement and BenchmarkValidate).
//
// Its scope is the hand-written validator's: the ClusterObjectSet's own metadata is replaced by a
// name before validation, and status is dropped from both objects.
type Library struct {
	structural *structuralschema.Structural
	strategy   crStrategy
}

// crStrategy is what is used of the custom resource strategy.
type crStrategy interface {
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// NewLibrary builds a validator from the v1 version of a ClusterObjectSet CRD.
func NewLibrary(crd *apiextensionsv1.CustomResourceDefinition) (*Library, error) {
	if crd == nil {
		return nil, errors.New("no CRD")
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != olmv1.GroupVersion.Version || v.Schema == nil {
			continue
		}
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("converting the schema of %s: %w", crd.Name, err)
		}
		structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("the schema of %s is not structural: %w", crd.Name, err)
		}
		schemaValidator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("the OpenAPI validator of %s: %w", crd.Name, err)
		}
		status := &apiextensions.CustomResourceSubresourceStatus{}
		kind := olmv1.GroupVersion.WithKind(olmv1.ClusterObjectSetKind)
		strategy := customresource.NewStrategy(nil, false, kind, schemaValidator, nil, structural, status, nil, nil)
		return &Library{structural: structural, strategy: strategy}, nil
	}
	return nil, fmt.Errorf("CRD %s has no schema for version %s", crd.Name, olmv1.GroupVersion.Version)
}

// ValidateCreate validates a ClusterObjectSet being created.
func (l *Library) ValidateCreate(obj *olmv1.ClusterObjectSet) field.ErrorList {
	if obj == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("no ClusterObjectSet to validate"))}
	}
	u, errs := l.decode(obj, true)
	if len(errs) > 0 {
		return errs
	}
	return l.strategy.Validate(context.Background(), u)
}

// ValidateUpdate validates an update from old to obj; a nil old is a create.
func (l *Library) ValidateUpdate(old, obj *olmv1.ClusterObjectSet) field.ErrorList {
	if old == nil {
		return l.ValidateCreate(obj)
	}
	if obj == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("no ClusterObjectSet to validate"))}
	}
	u, errs := l.decode(obj, true)
	if len(errs) > 0 {
		return errs
	}
	oldU, _ := l.decode(old, false)
	if oldU == nil {
		// As the hand-written validator does, an old object that cannot be encoded has no spec.
		oldU = &unstructured.Unstructured{Object: map[string]any{}}
		l.setHead(oldU)
	}
	return l.strategy.ValidateUpdate(context.Background(), u, oldU)
}

// decode makes of obj what the API server decodes from a client's JSON: pruned, nulls of declared
// fields dropped, embedded resources coerced. For the new object (strict) a coercion failure is the
// 400 Bad Request the API server answers; for the old one, what does not decode is dropped, as when
// the API server reads a stored object.
func (l *Library) decode(obj *olmv1.ClusterObjectSet, strict bool) (*unstructured.Unstructured, field.ErrorList) {
	data, err := json.Marshal(&olmv1.ClusterObjectSet{TypeMeta: obj.TypeMeta, Spec: obj.Spec})
	if err != nil {
		return nil, encodingErrors(&obj.Spec, err)
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(data, &u.Object); err != nil {
		return nil, field.ErrorList{field.InternalError(specPath, err)}
	}
	l.setHead(u)
	delete(u.Object, "status")
	structuralpruning.Prune(u.Object, l.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, l.structural)
	if ferr := schemaobjectmeta.Coerce(nil, u.Object, l.structural, false, !strict); ferr != nil {
		return nil, field.ErrorList{ferr}
	}
	structuraldefaulting.Default(u.Object, l.structural)
	return u, nil
}

// setHead sets the type and a fixed metadata: the scope of the hand-written validator is not the
// object's own metadata.
func (l *Library) setHead(u *unstructured.Unstructured) {
	u.SetAPIVersion(olmv1.GroupVersion.String())
	u.SetKind(olmv1.ClusterObjectSetKind)
	u.Object["metadata"] = map[string]any{"name": "x", "resourceVersion": "1"}
}
