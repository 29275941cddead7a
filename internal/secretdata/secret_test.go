package secretdata

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

func TestObjectDataSecretAndUnusable(t *testing.T) {
	want := ObjectDataSecret("my-cos", "sys", content.SecretOut{Name: "my-cos-0123456789abcdef", Data: map[string][]byte{"k": []byte("{}")}})
	if want.Namespace != "sys" || want.Name != "my-cos-0123456789abcdef" || want.Type != olmv1.SecretTypeObjectData ||
		!ptr.Deref(want.Immutable, false) || want.Labels[olmv1.LabelRevisionName] != "my-cos" || len(want.OwnerReferences) != 0 {
		t.Fatalf("ObjectDataSecret = %+v", want)
	}
	tests := map[string]struct {
		change func(*corev1.Secret)
		want   []string
	}{
		"exactly ours":         {change: func(*corev1.Secret) {}},
		"annotations are fine": {change: func(s *corev1.Secret) { s.Annotations = map[string]string{content.LastUsedAnnotation: "x"} }},
		"other type":           {change: func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, want: []string{`its type is "Opaque"`}},
		"mutable":              {change: func(s *corev1.Secret) { s.Immutable = nil }, want: []string{"it is not immutable"}},
		"other label":          {change: func(s *corev1.Secret) { s.Labels = map[string]string{olmv1.LabelRevisionName: "other"} }, want: []string{"it belongs to another ClusterObjectSet"}},
		"other data": {change: func(s *corev1.Secret) { s.Data = map[string][]byte{"k": []byte("SECRET")} },
			want: []string{"its data differs from the content it must hold"}},
		"everything": {change: func(s *corev1.Secret) { *s = corev1.Secret{} },
			want: []string{`its type is ""`, "it is not immutable", "it belongs to another ClusterObjectSet", "its data differs from the content it must hold"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := want.DeepCopy()
			tc.change(got)
			why := Unusable(got, want)
			if diff := cmp.Diff(tc.want, why); diff != "" {
				t.Errorf("Unusable (-want +got):\n%s", diff)
			}
			if strings.Contains(strings.Join(why, ""), "SECRET") {
				t.Error("a reason quotes the content")
			}
		})
	}
}
