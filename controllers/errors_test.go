package controllers

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestSanitize(t *testing.T) {
	const marker = "s3cr3t-value"
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", field.ErrorList{
		field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"), marker, "must not be "+marker),
	})
	tests := map[string]struct {
		err      error
		want     string
		keepsErr bool
	}{
		"invalid: paths and types only": {err: invalid, want: "the API server refused it: Invalid (422): spec.template.spec.containers[0].image: FieldValueInvalid", keepsErr: true},
		"wrapped invalid":               {err: errors.Join(errors.New("applying"), invalid), want: "the API server refused it: Invalid (422): spec.template.spec.containers[0].image: FieldValueInvalid", keepsErr: true},
		"conflict":                      {err: apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "x", errors.New(marker)), want: "the API server refused it: Conflict (409)", keepsErr: true},
		"not an API error":              {err: errors.New("connection refused"), want: "connection refused"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := sanitize(tc.err)
			if got.Error() != tc.want {
				t.Errorf("sanitize = %q, want %q", got.Error(), tc.want)
			}
			if strings.Contains(got.Error(), marker) {
				t.Errorf("sanitized message quotes a value: %q", got.Error())
			}
			if tc.keepsErr && !errors.Is(got, tc.err) && !apierrors.IsInvalid(got) && !apierrors.IsConflict(got) {
				t.Error("the original error is not reachable with errors.Is/As")
			}
		})
	}
	if sanitize(nil) != nil {
		t.Error("sanitize(nil) != nil")
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate(strings.Repeat("a", 2000)); len(got) != maxMessage || !strings.HasSuffix(got, "...") {
		t.Errorf("truncate gave %d bytes", len(got))
	}
	if got := truncate("short"); got != "short" {
		t.Errorf("truncate changed a short message: %q", got)
	}
}
