package drift

import (
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/builders"
)

// BenchmarkOwned is the cost the no-op check adds to every settled reconcile: every object of the
// real bundles, live taken equal to desired with our managedFields entry (maps granular, lists
// atomic). It skips without `make testdata`.
func BenchmarkOwned(b *testing.B) {
	for _, bundle := range []string{"prometheus-operator-crds", "argocd-install"} {
		b.Run(bundle, func(b *testing.B) {
			if _, err := builders.BundleDir(bundle); err != nil {
				b.Skip(err) // make testdata
			}
			cos, err := builders.Bundle("bench", bundle, "ns")
			if err != nil {
				b.Fatal(err)
			}
			var desired, live []map[string]any
			for _, p := range cos.Spec.Phases {
				for _, o := range p.Objects {
					desired = append(desired, o.Object.Object)
					live = append(live, withFields(o.Object.Object, fieldsOf(o.Object.Object)))
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				for i := range desired {
					if v := Owned(desired[i], live[i], fieldManager); !v.Unchanged {
						b.Fatal(v)
					}
				}
			}
		})
	}
}
