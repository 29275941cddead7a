package admission

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
)

// TestDecodeCOS checks that the one-pass decoder gives the same ClusterObjectSet as the typed JSON
// decoding, for every object of the corpus that the typed decoding accepts, and a spec size at most
// 128 bytes over the serialized spec.
func TestDecodeCOS(t *testing.T) {
	for name, tc := range corpus.Cases() {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(tc.New)
			if err != nil {
				t.Skip("not encodable as JSON")
			}
			want := &olmv1.ClusterObjectSet{}
			if err := json.Unmarshal(raw, want); err != nil {
				// The typed decoding refuses it (an inline object without a kind): the one-pass
				// decoder must still decode it, for validation to report it with its path.
				if _, _, err := DecodeCOS(raw); err != nil {
					t.Fatalf("DecodeCOS refused what validation must see: %v", err)
				}
				return
			}
			got, specSize, err := DecodeCOS(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(want, got) {
				t.Errorf("decoded differently (-typed +one-pass):\n%s", cmp.Diff(want, got))
			}
			spec, _ := json.Marshal(want.Spec)
			if d := specSize - len(spec); d < 0 || d > 128 {
				t.Errorf("spec size %d, serialized spec %d bytes", specSize, len(spec))
			}
		})
	}
}

func TestDecodeCOSErrors(t *testing.T) {
	for name, raw := range map[string]string{
		"not JSON":         `{"spec":`,
		"phases not list":  `{"spec":{"phases":{}}}`,
		"revision string":  `{"spec":{"revision":"one"}}`,
		"object not a map": `{"spec":{"phases":[{"name":"p","objects":[{"object":[]}]}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := DecodeCOS([]byte(raw)); err == nil {
				t.Error("decoded")
			}
		})
	}
}

// FuzzDecodeCOS checks that arbitrary bytes never panic the decoder.
func FuzzDecodeCOS(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"x"},"spec":{"revision":1,"phases":[{"name":"p","objects":[{"object":{"kind":"ConfigMap"}},{"ref":{"name":"s","key":"k"}}]}]}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		obj, size, err := DecodeCOS(raw)
		if err == nil && (obj == nil || size < 0) {
			t.Fatalf("decoded to %v, size %d", obj, size)
		}
	})
}
