package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/drift"
)

// stashed is m as the cache holds it, the digest stashed (drift.StashDigest).
func stashed(m metav1.ObjectMeta) *metav1.PartialObjectMetadata {
	drift.StashDigest(&m)
	return &metav1.PartialObjectMetadata{ObjectMeta: m}
}

// TestMetadataObject: the metadata built field by field reads back as the metadata it came from,
// as the generic conversion (unstructured's setters) gives it (with the digest the cache stashed
// back among the annotations), and decides as it does.
func TestMetadataObject(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	fields := metav1.NewFieldsV1(`{"f:data":{"f:k":{}},"f:metadata":{"f:annotations":{"f:` + drift.Annotation + `":{}},"f:labels":{"f:a":{}}}}`)
	for name, meta := range map[string]*metav1.PartialObjectMetadata{
		"everything": {ObjectMeta: metav1.ObjectMeta{
			Name: "x", Namespace: "n", UID: "u", ResourceVersion: "7", Generation: 3, DeletionTimestamp: &deleted,
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{drift.Annotation: "sha256:aa"}, Finalizers: []string{"f"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "olm.operatorframework.io/v1", Kind: "ClusterObjectSet", Name: "c", UID: "cu", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}, {APIVersion: "v1", Kind: "X", Name: "o", UID: "ou"}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: FieldOwner, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields},
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)},
			},
		}},
		"cluster-scoped, bare": {ObjectMeta: metav1.ObjectMeta{Name: "y"}},
		// As the cache holds it (drift.StashDigest).
		"the digest stashed": stashed(metav1.ObjectMeta{
			Name: "x", Namespace: "n", Annotations: map[string]string{drift.Annotation: "sha256:aa"}, Labels: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldOwner, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields}},
		}),
	} {
		t.Run(name, func(t *testing.T) {
			meta.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("ConfigMap"))
			got := metadataObject(meta)
			want := &unstructured.Unstructured{Object: map[string]any{}}
			want.SetGroupVersionKind(meta.GroupVersionKind())
			want.SetName(meta.Name)
			want.SetNamespace(meta.Namespace)
			want.SetUID(meta.UID)
			want.SetResourceVersion(meta.ResourceVersion)
			want.SetGeneration(meta.Generation)
			want.SetLabels(meta.Labels)
			var annotations map[string]string
			for k, v := range drift.CachedAnnotations(&meta.ObjectMeta) {
				if annotations == nil {
					annotations = map[string]string{}
				}
				annotations[k] = v.(string)
			}
			want.SetAnnotations(annotations)
			want.SetFinalizers(meta.Finalizers)
			want.SetOwnerReferences(meta.OwnerReferences)
			want.SetManagedFields(meta.ManagedFields)
			if meta.DeletionTimestamp != nil {
				want.SetDeletionTimestamp(meta.DeletionTimestamp)
			}
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Errorf("metadata (-generic +built):\n%s", diff)
			}
			desired := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"labels": map[string]any{"a": "b"}}, "data": map[string]any{"k": "v"}}
			v1, n1 := drift.UnchangedMetadata(desired, want.Object, FieldOwner, "sha256:aa")
			v2, n2 := drift.UnchangedMetadata(desired, got.Object, FieldOwner, "sha256:aa")
			if v1 != v2 || n1 != n2 {
				t.Errorf("decided %+v %v, generic %+v %v", v2, n2, v1, n1)
			}
		})
	}
}
