package validation

import (
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
)

// generatedCRD reads the CRD this package was written from (make manifests).
func generatedCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := readGeneratedCRD()
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func readGeneratedCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	raw, err := os.ReadFile("../../../config/crd/bases/olm.operatorframework.io_clusterobjectsets.yaml")
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

func setProp(crd *apiextensionsv1.CustomResourceDefinition, name string, change func(*apiextensionsv1.JSONSchemaProps)) {
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	p := spec.Properties[name]
	change(&p)
	spec.Properties[name] = p
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
}

func f64(v float64) *float64 { return &v }

func TestBoundsFromCRD(t *testing.T) {
	deadline := func(m int32) *olmv1.ClusterObjectSet {
		return cos(b.WithProgressDeadline(m), b.WithPhase("a", cm("x")))
	}
	manyPhases := func(n int) *olmv1.ClusterObjectSet {
		c := cos()
		for i := range n {
			c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: fmt.Sprintf("p%d", i), Objects: []olmv1.ClusterObjectSetObject{cm(fmt.Sprintf("c%d", i))}})
		}
		return c
	}
	tests := map[string]struct {
		change  func(*apiextensionsv1.CustomResourceDefinition)
		differs bool
		obj     *olmv1.ClusterObjectSet
		// wantFields are the fields of the errors with the served limits.
		wantFields []string
	}{
		"the generated CRD holds this package's bounds": {change: func(*apiextensionsv1.CustomResourceDefinition) {},
			obj: deadline(1), wantFields: []string{"spec.progressDeadlineMinutes"}},
		"a lowered deadline minimum (upstream's e2e)": {differs: true, obj: deadline(1),
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				setProp(c, "progressDeadlineMinutes", func(p *apiextensionsv1.JSONSchemaProps) { p.Minimum = f64(1) })
			}},
		"a lowered deadline minimum still bounds": {differs: true, obj: deadline(0 + 1),
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				setProp(c, "progressDeadlineMinutes", func(p *apiextensionsv1.JSONSchemaProps) { p.Minimum = f64(2) })
			}, wantFields: []string{"spec.progressDeadlineMinutes"}},
		"a lowered deadline maximum": {differs: true, obj: deadline(700),
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				setProp(c, "progressDeadlineMinutes", func(p *apiextensionsv1.JSONSchemaProps) { p.Maximum = f64(60) })
			}, wantFields: []string{"spec.progressDeadlineMinutes"}},
		"a raised phase count": {differs: true, obj: manyPhases(25),
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				setProp(c, "phases", func(p *apiextensionsv1.JSONSchemaProps) { n := int64(30); p.MaxItems = &n })
			}},
		"a bound removed": {differs: true, obj: deadline(5000),
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				setProp(c, "progressDeadlineMinutes", func(p *apiextensionsv1.JSONSchemaProps) { p.Maximum = nil })
			}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			crd := generatedCRD(t)
			tc.change(crd)
			l := BoundsFromCRD(crd)
			if l.Differs() != tc.differs {
				t.Fatalf("Differs = %v, want %v", l.Differs(), tc.differs)
			}
			var got []string
			for _, e := range l.ValidateCreate(tc.obj) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.wantFields, got); diff != "" {
				t.Errorf("error fields (-want +got):\n%s", diff)
			}
			// Updates see the same bounds (from an old object without a deadline, so nothing ratchets).
			old := tc.obj.DeepCopy()
			old.Spec.ProgressDeadlineMinutes = 0
			got = nil
			for _, e := range l.ValidateUpdate(old, tc.obj) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.wantFields, got); diff != "" {
				t.Errorf("update error fields (-want +got):\n%s", diff)
			}
		})
	}
	// The package-level functions keep the generated bounds, and the generated schema is not changed
	// by a served one.
	crd := generatedCRD(t)
	setProp(crd, "progressDeadlineMinutes", func(p *apiextensionsv1.JSONSchemaProps) { p.Minimum = f64(1) })
	_ = BoundsFromCRD(crd)
	if errs := ValidateCreate(deadline(1)); len(errs) != 1 {
		t.Errorf("ValidateCreate after a served CRD: %v", errs)
	}
	if BoundsFromCRD(nil).Differs() {
		t.Error("no CRD differs")
	}
}
