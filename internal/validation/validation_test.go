package validation

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
)

// causes renders errors as the API server's status causes, sorted by field then message.
func causes(errs field.ErrorList) []corpus.Cause {
	var out []corpus.Cause
	for _, e := range errs {
		out = append(out, corpus.Cause{Field: e.Field, Message: e.ErrorBody()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Field != out[j].Field {
			return out[i].Field < out[j].Field
		}
		return out[i].Message < out[j].Message
	})
	return out
}

func check(old, obj *olmv1.ClusterObjectSet) field.ErrorList {
	if old == nil {
		return ValidateCreate(obj)
	}
	return ValidateUpdate(old, obj)
}

func TestCorpus(t *testing.T) {
	for name, tc := range corpus.Cases() {
		t.Run(name, func(t *testing.T) {
			got := causes(check(tc.Old, tc.New))
			if diff := cmp.Diff(tc.Want, got); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
		})
	}
}
