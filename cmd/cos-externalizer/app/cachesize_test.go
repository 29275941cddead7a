package app

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSecretMetadataOnlyMeasures: the transform hands each Secret to measure with its data, before
// dropping it; without measure it only drops.
func TestSecretMetadataOnlyMeasures(t *testing.T) {
	secret := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "uid-s"}, Data: map[string][]byte{"key": []byte("content")}}
	}
	measured := map[types.UID]int{}
	measure := func(sec *corev1.Secret) {
		for k, v := range sec.Data {
			measured[sec.UID] += len(k) + len(v)
		}
	}
	for name, tc := range map[string]struct {
		measure func(*corev1.Secret)
		want    map[types.UID]int
	}{
		"measured before the data is dropped": {measure: measure, want: map[types.UID]int{"uid-s": 10}},
		"no measure":                          {want: map[types.UID]int{}},
	} {
		t.Run(name, func(t *testing.T) {
			clear(measured)
			got, err := secretMetadataOnly(tc.measure)(secret())
			if err != nil {
				t.Fatal(err)
			}
			if sec := got.(*corev1.Secret); sec.Data != nil {
				t.Errorf("data kept: %v", sec.Data)
			}
			if diff := cmp.Diff(tc.want, measured); diff != "" {
				t.Errorf("measured (-want +got):\n%s", diff)
			}
		})
	}
}
