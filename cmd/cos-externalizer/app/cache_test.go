package app_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
)

// objectDataSecret is an object-data Secret as the webhook writes it and the reconciler owns it.
func objectDataSecret(data map[string][]byte, stringData map[string]string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: olmv1.DefaultSystemNamespace, Name: "x-1a2b", UID: "uid-1", ResourceVersion: "42",
			Labels:          map[string]string{olmv1.LabelRevisionName: "x"},
			Annotations:     map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: "x", UID: "cos-uid", Controller: ptr.To(true)}},
		},
		Type:       olmv1.SecretTypeObjectData,
		Immutable:  ptr.To(true),
		Data:       data,
		StringData: stringData,
	}
}

// TestCacheKeepsSecretMetadataOnly: the manager's cache stores Secrets without data, string data and
// managedFields, everything else as read; other objects as read.
func TestCacheKeepsSecretMetadataOnly(t *testing.T) {
	opts := app.CacheOptions(olmv1.DefaultSystemNamespace)
	var transform func(any) (any, error)
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*corev1.Secret); ok {
			transform = by.Transform
		}
	}
	if transform == nil {
		t.Fatal("the cache's Secret informer has no transform")
	}
	unstructuredSecret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "managed"}, "data": map[string]any{"k": "dg=="},
	}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}
	for name, tc := range map[string]struct {
		in, want runtime.Object
	}{
		"object-data Secret": {
			in:   objectDataSecret(map[string][]byte{"key": []byte("content")}, nil),
			want: objectDataSecret(nil, nil),
		},
		"string data too": {
			in:   objectDataSecret(map[string][]byte{"key": []byte("content")}, map[string]string{"s": "v"}),
			want: objectDataSecret(nil, nil),
		},
		"managedFields too": {
			in: func() runtime.Object {
				sec := objectDataSecret(map[string][]byte{"key": []byte("content")}, nil)
				sec.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "cos-externalizer", Operation: metav1.ManagedFieldsOperationUpdate}}
				return sec
			}(),
			want: objectDataSecret(nil, nil),
		},
		"empty Secret": {
			in:   objectDataSecret(map[string][]byte{}, nil),
			want: objectDataSecret(nil, nil),
		},
		"unstructured Secret unchanged": {in: unstructuredSecret.DeepCopy(), want: unstructuredSecret.DeepCopy()},
		"ConfigMap unchanged":           {in: cm.DeepCopy(), want: cm.DeepCopy()},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := transform(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cached object (-want +got):\n%s", diff)
			}
		})
	}
}
