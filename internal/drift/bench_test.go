package drift

import (
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/builders"
)

// BenchmarkFingerprint is the cost the no-op check adds to every settled reconcile: the
// fingerprint of every object of the real bundles (live taken equal to desired). It skips without
// `make testdata`.
func BenchmarkFingerprint(b *testing.B) {
	for _, bundle := range []string{"prometheus-operator-crds", "argocd-install"} {
		b.Run(bundle, func(b *testing.B) {
			if _, err := builders.BundleDir(bundle); err != nil {
				b.Skip(err) // make testdata
			}
			cos, err := builders.Bundle("bench", bundle, "ns")
			if err != nil {
				b.Fatal(err)
			}
			var objs []map[string]any
			for _, p := range cos.Spec.Phases {
				for _, o := range p.Objects {
					objs = append(objs, o.Object.Object)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, o := range objs {
					if _, err := Fingerprint(o, o); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
