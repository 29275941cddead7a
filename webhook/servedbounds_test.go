package webhook

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/validation"
)

// crdReader serves a CRD (or an error) and counts its reads.
type crdReader struct {
	crd   *apiextensionsv1.CustomResourceDefinition
	err   error
	reads int
}

func (r *crdReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.reads++
	if r.err != nil {
		return r.err
	}
	r.crd.DeepCopyInto(obj.(*apiextensionsv1.CustomResourceDefinition))
	return nil
}

func (r *crdReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not listed")
}

// setDeadline changes the served CRD's bound of spec.progressDeadlineMinutes, as a new resourceVersion.
func (r *crdReader) setDeadline(bound string, v float64) {
	spec := r.crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	p := spec.Properties["progressDeadlineMinutes"]
	if bound == "minimum" {
		p.Minimum = &v
	} else {
		p.Maximum = &v
	}
	spec.Properties["progressDeadlineMinutes"] = p
	r.crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	n, _ := strconv.Atoi(r.crd.ResourceVersion)
	r.crd.ResourceVersion = strconv.Itoa(n + 1)
}

func generatedCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile("../config/crd/bases/olm.operatorframework.io_clusterobjectsets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	crd.ResourceVersion = "1"
	return crd
}

// TestServedBoundsConfirmsBoundRefusals validates a sequence of objects while the served CRD changes
// between them; the TTL is long, so only confirmations read the CRD after the first reading.
func TestServedBoundsConfirmsBoundRefusals(t *testing.T) {
	deadline := func(m int32) *olmv1.ClusterObjectSet {
		return b.COS("c", b.WithProgressDeadline(m), b.WithPhase("a", b.Inline(b.ConfigMap("default", "x", nil))))
	}
	badName := b.COS("c", b.WithProgressDeadline(1), b.WithPhase("A_B", b.Inline(b.ConfigMap("default", "x", nil))))
	type step struct {
		change func(*crdReader)
		obj    *olmv1.ClusterObjectSet
		// fields are those of the errors; reads the CRD's readings so far.
		fields []string
		reads  int
	}
	tests := map[string][]step{
		"a valid object reads nothing more": {
			{obj: deadline(30), reads: 1},
			{obj: deadline(40), reads: 1},
		},
		"a minimum lowered just now (upstream's e2e)": {
			{obj: deadline(30), reads: 1},
			{change: func(r *crdReader) { r.setDeadline("minimum", 1) }, obj: deadline(1), reads: 2},
			{obj: deadline(1), reads: 2},
		},
		"a maximum raised just now": {
			{obj: deadline(30), reads: 1},
			{change: func(r *crdReader) { r.setDeadline("maximum", 1000) }, obj: deadline(800), reads: 2},
		},
		"a bound refusal the served CRD confirms": {
			{obj: deadline(1), fields: []string{"spec.progressDeadlineMinutes"}, reads: 2},
			{obj: deadline(1), fields: []string{"spec.progressDeadlineMinutes"}, reads: 3},
		},
		"a minimum lowered, not enough": {
			{obj: deadline(30), reads: 1},
			{change: func(r *crdReader) { r.setDeadline("minimum", 5) }, obj: deadline(1), fields: []string{"spec.progressDeadlineMinutes"}, reads: 2},
		},
		"a refusal on no bound reads nothing": {
			{obj: deadline(30), reads: 1},
			{change: func(r *crdReader) { r.setDeadline("minimum", 1) }, obj: b.COS("c", b.WithProgressDeadline(30), b.WithPhase("A_B", b.Inline(b.ConfigMap("default", "x", nil)))),
				fields: []string{"spec.phases[0].name"}, reads: 1},
		},
		"a refusal on a bound and on a rule: the rule's stands": {
			{obj: deadline(30), reads: 1},
			{change: func(r *crdReader) { r.setDeadline("minimum", 1) }, obj: badName, fields: []string{"spec.phases[0].name"}, reads: 2},
		},
		"a minimum raised: the last reading admits until the TTL": {
			{obj: deadline(30), reads: 1},
			{change: func(r *crdReader) { r.setDeadline("minimum", 60) }, obj: deadline(30), reads: 1},
		},
		"the CRD unreadable: the refusal of the last reading stands": {
			{obj: deadline(30), reads: 1},
			{change: func(r *crdReader) { r.setDeadline("minimum", 1); r.err = errors.New("forbidden") }, obj: deadline(1),
				fields: []string{"spec.progressDeadlineMinutes"}, reads: 2},
			{change: func(r *crdReader) { r.err = nil }, obj: deadline(1), reads: 3},
		},
		"the CRD never read: the generated bounds, confirmed": {
			{change: func(r *crdReader) { r.err = errors.New("forbidden") }, obj: deadline(1), fields: []string{"spec.progressDeadlineMinutes"}, reads: 2},
			{change: func(r *crdReader) { r.err = nil; r.setDeadline("minimum", 1) }, obj: deadline(1), reads: 3},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			r := &crdReader{crd: generatedCRD(t)}
			s := &ServedBounds{Reader: r, TTL: time.Hour}
			for i, st := range steps {
				if st.change != nil {
					st.change(r)
				}
				errs := s.Validate(context.Background(), func(l validation.Bounds) field.ErrorList { return l.ValidateCreate(st.obj) })
				var fields []string
				for _, e := range errs {
					if e.Detail != validation.SkippedMessage {
						fields = append(fields, e.Field)
					}
				}
				if diff := cmp.Diff(st.fields, fields); diff != "" {
					t.Errorf("step %d: error fields (-want +got):\n%s", i, diff)
				}
				if r.reads != st.reads {
					t.Errorf("step %d: %d readings of the CRD, want %d", i, r.reads, st.reads)
				}
			}
		})
	}
	var nilBounds *ServedBounds
	if errs := nilBounds.Validate(context.Background(), func(l validation.Bounds) field.ErrorList { return l.ValidateCreate(deadline(1)) }); len(errs) != 1 {
		t.Errorf("no ServedBounds: want the generated bounds' error, got %v", errs)
	}
}
