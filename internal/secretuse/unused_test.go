package secretuse

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

func TestUnusedSecrets(t *testing.T) {
	created := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	secret := func(mutate ...func(*corev1.Secret)) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "x-0123456789abcdef", CreationTimestamp: metav1.NewTime(created),
				Labels: map[string]string{olmv1.LabelRevisionName: "x"}},
			Type: olmv1.SecretTypeObjectData,
		}
		for _, m := range mutate {
			m(s)
		}
		return s
	}
	referencing := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "uid-x"}, Spec: olmv1.ClusterObjectSetSpec{
		Phases: []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: []olmv1.ClusterObjectSetObject{{Ref: olmv1.ObjectSourceRef{Name: "x-0123456789abcdef", Key: "k"}}}}}}}
	other := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "uid-x"}}
	// A ClusterObjectSet of another name that references x's Secret, as a ref copied from x's stored form.
	copied := referencing.DeepCopy()
	copied.Name, copied.UID = "y", "uid-y"
	deleting := copied.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: created}
	tests := map[string]struct {
		sec  *corev1.Secret
		cos  *olmv1.ClusterObjectSet
		want bool
	}{
		"referenced by another ClusterObjectSet, its own gone": {sec: secret(), cos: copied},
		"referenced only by one being deleted":                 {sec: secret(), cos: deleting, want: true},
		"owned by one being deleted (the collector's)": {sec: secret(func(s *corev1.Secret) {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: "y", UID: "uid-y"}}
		}), cos: deleting},
		"no ClusterObjectSet": {sec: secret(), want: true},
		// Times written by others never decide: the sweep's own clock does (secretuse.Progress).
		"a last use in the future is no reason to keep it": {sec: secret(func(s *corev1.Secret) {
			s.Annotations = map[string]string{content.LastUsedAnnotation: created.Add(time.Hour).Format(time.RFC3339)}
		}), want: true},
		"referenced": {sec: secret(), cos: referencing},
		"owned": {sec: secret(func(s *corev1.Secret) {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: "x", UID: "uid-x"}}
		}), cos: other},
		"neither referenced nor owned": {sec: secret(), cos: other, want: true},
		"another type":                 {sec: secret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque })},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var sets []olmv1.ClusterObjectSet
			if tc.cos != nil {
				sets = append(sets, *tc.cos)
			}
			if got := len(UnusedSecrets([]corev1.Secret{*tc.sec}, sets, "sys")) == 1; got != tc.want {
				t.Errorf("unused = %v, want %v", got, tc.want)
			}
		})
	}
}
