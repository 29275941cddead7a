package secretdata

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func objectData() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "x-abc", Namespace: "sys", UID: "uid-1", ResourceVersion: "7",
			Labels:          map[string]string{olmv1.LabelRevisionName: "x", "team": "a"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ClusterObjectSet", Name: "x", UID: "cos-1"}}},
		Type:      olmv1.SecretTypeObjectData,
		Immutable: ptr.To(true),
		Data:      map[string][]byte{"k1": []byte("v1"), "k2": {0x1f, 0x8b, 0}},
	}
}

func TestQuarantineRoundTrip(t *testing.T) {
	sec := objectData()
	q := Quarantine(sec)
	if q.Labels[olmv1.LabelRevisionName] != "" || q.Type == olmv1.SecretTypeObjectData {
		t.Fatalf("the copy reads as an object-data Secret: type %q, labels %v", q.Type, q.Labels)
	}
	if !SameQuarantine(q, sec) {
		t.Error("SameQuarantine = false for the copy just made")
	}
	key, uid, ok := QuarantineOf(q)
	if !ok || key.Name != "x-abc" || key.Namespace != "sys" || uid != "uid-1" {
		t.Errorf("QuarantineOf = %v %v %v", key, uid, ok)
	}
	got, err := Restored(q)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "x-abc", Namespace: "sys", Labels: sec.Labels},
		Type:       olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: sec.Data,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Restored (-want +got):\n%s", diff)
	}
}

func TestRestoredRefuses(t *testing.T) {
	tests := map[string]func(q *corev1.Secret){
		"data changed":          func(q *corev1.Secret) { q.Data["k1"] = []byte("v2") },
		"a key added":           func(q *corev1.Secret) { q.Data["k3"] = nil },
		"a key renamed":         func(q *corev1.Secret) { q.Data["k3"] = q.Data["k1"]; delete(q.Data, "k1") },
		"not a copy":            func(q *corev1.Secret) { delete(q.Labels, LabelQuarantine) },
		"another type":          func(q *corev1.Secret) { q.Type = corev1.SecretTypeOpaque },
		"name not the uid's":    func(q *corev1.Secret) { q.Name = "cos-quarantine-other" },
		"labels unreadable":     func(q *corev1.Secret) { q.Annotations[AnnotationQuarantineLabels] = "{" },
		"no revision-name left": func(q *corev1.Secret) { q.Annotations[AnnotationQuarantineLabels] = `{"team":"a"}` },
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			q := Quarantine(objectData())
			q.Data = map[string][]byte{"k1": []byte("v1"), "k2": {0x1f, 0x8b, 0}}
			change(q)
			if _, err := Restored(q); err == nil {
				t.Error("Restored accepted it")
			} else if got := err.Error(); strings.Contains(got, "v1") || strings.Contains(got, "v2") {
				t.Errorf("error %q names content", got)
			}
		})
	}
}

func TestDataDigest(t *testing.T) {
	a := map[string][]byte{"ab": []byte("c")}
	b := map[string][]byte{"a": []byte("bc")}
	if DataDigest(a) == DataDigest(b) {
		t.Error("key and value boundaries are not part of the digest")
	}
	if DataDigest(nil) != DataDigest(map[string][]byte{}) {
		t.Error("nil and empty data digest differently")
	}
}
