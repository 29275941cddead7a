package validation

import (
	"testing"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
)

// BenchmarkValidate measures the validator on the Argo CD install as one inline ClusterObjectSet
// (650 KB), the size of request the webhook sees.
func BenchmarkValidate(b_ *testing.B) {
	obj, err := b.Bundle("bench", "argocd-install", "argocd")
	if err != nil {
		b_.Skip(err)
	}
	archived := obj.DeepCopy()
	archived.Spec.LifecycleState = olmv1.LifecycleStateArchived
	b_.Run("create", func(b_ *testing.B) {
		for b_.Loop() {
			if errs := ValidateCreate(obj); len(errs) > 0 {
				b_.Fatal(errs)
			}
		}
	})
	b_.Run("update", func(b_ *testing.B) {
		for b_.Loop() {
			if errs := ValidateUpdate(obj, archived); len(errs) > 0 {
				b_.Fatal(errs)
			}
		}
	})
}
