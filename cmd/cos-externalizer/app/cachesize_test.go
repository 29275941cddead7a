package app

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/admission"
	"github.com/cos-externalizer/cos-externalizer/internal/reconciler/drift"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/finalizerowner"
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

// TestClusterObjectSetLean: the cache keeps a ClusterObjectSet's every field but kubectl's
// last-applied annotation and the managedFields that own no finalizer, with only the finalizer
// fields of the others; finalizerowner judges the lean copy as the whole one.
func TestClusterObjectSetLean(t *testing.T) {
	entry := func(manager, op, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), APIVersion: "olm.operatorframework.io/v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	creator := entry("kubectl", "Update", `{"f:metadata":{"f:labels":{"f:a":{}}},"f:spec":{"f:phases":{}}}`)
	ours := entry(finalizerowner.OurFieldManager, "Update", `{"f:metadata":{"f:finalizers":{".":{},"v:\"olm.operatorframework.io/teardown\"":{}}}}`)
	mixed := entry("olm", "Apply", `{"f:metadata":{"f:finalizers":{"v:\"olm.operatorframework.io/teardown\"":{}},"f:labels":{"f:b":{}}},"f:spec":{"f:revision":{}}}`)
	mixedLean := entry("olm", "Apply", `{"f:metadata":{"f:finalizers":{"v:\"olm.operatorframework.io/teardown\"":{}}}}`)
	status := entry(finalizerowner.OurFieldManager, "Update", `{"f:status":{"f:conditions":{}}}`)
	status.Subresource = "status"
	broken := entry("x", "Update", `{"f:finalizers":`)
	ref := func(key string) olmv1.ClusterObjectSetObject {
		return olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: "cos-1a2b", Namespace: "olmv1-system", Key: key}}
	}
	cos := func(ann map[string]string, managed ...metav1.ManagedFieldsEntry) *olmv1.ClusterObjectSet {
		return &olmv1.ClusterObjectSet{
			ObjectMeta: metav1.ObjectMeta{Name: "cos", Annotations: ann, Finalizers: []string{finalizerowner.Teardown}, ManagedFields: managed},
			Spec:       olmv1.ClusterObjectSetSpec{Phases: []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: []olmv1.ClusterObjectSetObject{ref("a"), ref("b")}}}},
		}
	}
	for name, tc := range map[string]struct {
		in, want *olmv1.ClusterObjectSet
	}{
		"finalizer entries kept, trimmed": {
			in:   cos(nil, creator, ours, mixed, status),
			want: cos(nil, ours, mixedLean),
		},
		"no finalizer entry":           {in: cos(nil, creator, status), want: cos(nil)},
		"an entry that cannot be read": {in: cos(nil, broken, ours), want: cos(nil, ours)},
		"last-applied dropped, other annotations kept": {
			in:   cos(map[string]string{admission.LastAppliedAnnotation: `{"spec":{}}`, "a": "b"}),
			want: cos(map[string]string{"a": "b"}),
		},
	} {
		t.Run(name, func(t *testing.T) {
			owners := finalizerowner.Owners(tc.in.ManagedFields, finalizerowner.Teardown)
			got, err := clusterObjectSetLean(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			lean := got.(*olmv1.ClusterObjectSet)
			if diff := cmp.Diff(tc.want, lean); diff != "" {
				t.Errorf("cached (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(owners, finalizerowner.Owners(lean.ManagedFields, finalizerowner.Teardown)); diff != "" {
				t.Errorf("finalizer owners (-whole +lean):\n%s", diff)
			}
			refs := lean.Spec.Phases[0].Objects
			if unsafe.StringData(refs[0].Ref.Name) != unsafe.StringData(refs[1].Ref.Name) {
				t.Errorf("two refs to one Secret keep two copies of its name")
			}
		})
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", ManagedFields: []metav1.ManagedFieldsEntry{creator}}}
	if got, _ := clusterObjectSetLean(cm.DeepCopy()); cmp.Diff(cm, got) != "" {
		t.Errorf("another object changed: %v", got)
	}
}

// TestManagedObjectLean: the metadata of a managed object keeps everything but kubectl's
// last-applied annotation; a whole object loses its managedFields too (they are read from the
// metadata).
func TestManagedObjectLean(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "cos-externalizer", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}}}
	meta := func(ann map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: ann, Labels: map[string]string{"l": "v"}, ManagedFields: managed}}
	}
	whole := func(withManaged bool, ann map[string]any) *unstructured.Unstructured {
		md := map[string]any{"name": "x", "annotations": ann}
		if withManaged {
			md["managedFields"] = []any{map[string]any{"manager": "cos-externalizer"}}
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": map[string]any{"k": "v"}}}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: managed}}
	for name, tc := range map[string]struct {
		in, want any
	}{
		"metadata": {
			in:   meta(map[string]string{admission.LastAppliedAnnotation: "{}", drift.Annotation: "sha256:aa"}),
			want: meta(map[string]string{drift.Annotation: "sha256:aa"}),
		},
		"metadata without annotations": {in: meta(nil), want: meta(nil)},
		"whole object": {
			in:   whole(true, map[string]any{admission.LastAppliedAnnotation: "{}", drift.Annotation: "sha256:aa"}),
			want: whole(false, map[string]any{drift.Annotation: "sha256:aa"}),
		},
		"a typed object passes": {in: sec.DeepCopy(), want: sec.DeepCopy()},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := managedObjectLean(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cached (-want +got):\n%s", diff)
			}
		})
	}
}
