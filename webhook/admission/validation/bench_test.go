package validation

import (
	"testing"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
)

// BenchmarkValidate measures the validator on real bundles as one inline ClusterObjectSet each: the
// Argo CD install (650 KB) and the prometheus-operator CRDs (2.8 MB), the sizes of request the
// webhook sees (`make testdata`; TestFastPathTaken runs excerpts of them). It fails when the bodies of
// their inline objects are not left unencoded. An update archives the object: the phases, with every
// inline object, compare equal.
func BenchmarkValidate(b_ *testing.B) {
	for _, bundle := range []struct{ name, dir, namespace string }{
		{"argocd", "argocd-install", "argocd"},
		{"prometheus", "prometheus-operator-crds", "monitoring"},
	} {
		b_.Run(bundle.name, func(b_ *testing.B) {
			obj, err := b.Bundle("bench", bundle.dir, bundle.namespace)
			if err != nil {
				b_.Skip(err)
			}
			if _, bodies, ok := splitBodies(&obj.Spec); !ok || len(bodies) == 0 {
				b_.Fatalf("%d bodies unencoded, fast path %t", len(bodies), ok)
			}
			archived := obj.DeepCopy()
			archived.Spec.LifecycleState = olmv1.LifecycleStateArchived
			b_.Run("create", func(b_ *testing.B) {
				b_.ReportAllocs()
				for b_.Loop() {
					if errs := ValidateCreate(obj); len(errs) > 0 {
						b_.Fatal(errs)
					}
				}
			})
			b_.Run("update", func(b_ *testing.B) {
				b_.ReportAllocs()
				for b_.Loop() {
					if errs := ValidateUpdate(obj, archived); len(errs) > 0 {
						b_.Fatal(errs)
					}
				}
			})
		})
	}
}
