package app

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/drift"
	"github.com/cos-externalizer/cos-externalizer/internal/finalizerowner"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
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

// TestSecretMetadataOnlyTwice: a Secret transformed twice (an informer's initial list) keeps the size
// measured the first time; nothing else changes the second time.
func TestSecretMetadataOnlyTwice(t *testing.T) {
	recorded := map[types.UID]int{}
	record := func(sec *corev1.Secret) { // as unreferenced.Bound.RecordSize: the last size wins
		recorded[sec.UID] = 0
		for k, v := range sec.Data {
			recorded[sec.UID] += len(k) + len(v)
		}
	}
	transform := secretMetadataOnly(record)
	once, err := transform(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "uid-s"}, Data: map[string][]byte{"key": []byte("content")}})
	if err != nil {
		t.Fatal(err)
	}
	want := once.(*corev1.Secret).DeepCopy()
	twice, err := transform(once)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.UID]int{"uid-s": 10}, recorded); diff != "" {
		t.Errorf("recorded sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, twice); diff != "" {
		t.Errorf("transformed twice (-once +twice):\n%s", diff)
	}
}

// TestClusterObjectSetLean: the cache keeps a ClusterObjectSet's every field but kubectl's
// last-applied annotation and the managedFields that own no finalizer, with only the finalizer
// fields of the others; finalizerowner judges the lean copy as the whole one.
func TestClusterObjectSetLean(t *testing.T) {
	entry := func(manager, op, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), APIVersion: "olm.operatorframework.io/v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
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

// TestManagedObjectLean: the metadata of a managed object keeps, of its annotations, the digest
// alone, in selfLink (drift.StashDigest; TestManagedObjectLeanKeepsDecisions); a whole object loses
// kubectl's last-applied annotation and its managedFields (they are read from the metadata).
func TestManagedObjectLean(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "cos-externalizer", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{}}`)}}
	meta := func(ann map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: ann, Labels: map[string]string{"l": "v"}, ManagedFields: managed}}
	}
	// cached is meta(ann) as the cache holds it: the digest in selfLink (drift.StashDigest).
	cached := func(ann map[string]string) *metav1.PartialObjectMetadata {
		m := meta(ann)
		drift.StashDigest(&m.ObjectMeta)
		return m
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
			in:   meta(map[string]string{admission.LastAppliedAnnotation: "{}", drift.Annotation: "sha256:aa", "other": "x"}),
			want: cached(map[string]string{drift.Annotation: "sha256:aa"}),
		},
		"metadata without the digest":  {in: meta(map[string]string{"other": "x"}), want: meta(nil)},
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
			// An informer may transform an object twice (its initial list goes through a
			// temporary store first): the second time changes nothing.
			again, err := managedObjectLean(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, again); diff != "" {
				t.Errorf("transformed twice (-want +got):\n%s", diff)
			}
		})
	}
}

// archivedSet builds an archived ClusterObjectSet from spec: each byte an object, in phases of
// (byte>>6)+1 objects: a ref (to one of four Secrets, with or without the namespace written) or, for
// one value in eight, an inline object.
func archivedSet(spec []byte) *olmv1.ClusterObjectSet {
	cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: olmv1.ClusterObjectSetSpec{LifecycleState: olmv1.LifecycleStateArchived}}
	var phase *olmv1.ClusterObjectSetPhase
	left := 0
	for i, b := range spec {
		if left == 0 {
			cos.Spec.Phases = append(cos.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: fmt.Sprintf("p%d", i)})
			phase, left = &cos.Spec.Phases[len(cos.Spec.Phases)-1], int(b>>6)+1
		}
		left--
		o := olmv1.ClusterObjectSetObject{}
		if b&7 == 7 {
			o.Object = unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "data": map[string]any{"k": "v"}}}
		} else {
			o.Ref = olmv1.ObjectSourceRef{Name: fmt.Sprintf("s%d", b&3), Key: fmt.Sprintf("k%d", i)}
			if b&4 != 0 {
				o.Ref.Namespace = olmv1.DefaultSystemNamespace
			}
		}
		phase.Objects = append(phase.Objects, o)
	}
	return cos
}

// FuzzTrimArchived: on a trimmed archived ClusterObjectSet, the Secrets referenced and where each is
// first referenced are those of the whole one, and no kept inline object holds content.
func FuzzTrimArchived(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{0xc0, 0, 0, 0, 0x41, 5, 7, 0x87, 1})
	f.Add([]byte{7, 7, 0x47, 3})
	f.Fuzz(func(t *testing.T, spec []byte) {
		whole := archivedSet(spec)
		got, err := clusterObjectSetLean(whole.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		lean := got.(*olmv1.ClusterObjectSet)
		ns := olmv1.DefaultSystemNamespace
		if diff := cmp.Diff(whole.ReferencedSecrets(ns), lean.ReferencedSecrets(ns)); diff != "" {
			t.Fatalf("referenced Secrets (-whole +lean):\n%s", diff)
		}
		for _, key := range whole.ReferencedSecrets(ns) {
			w, _ := whole.RefTo(key.Namespace, key.Name, ns)
			l, _ := lean.RefTo(key.Namespace, key.Name, ns)
			if w != l {
				t.Fatalf("first ref to %s: %s, trimmed %s", key, w, l)
			}
		}
		if len(lean.Spec.Phases) != len(whole.Spec.Phases) {
			t.Fatalf("%d phases, trimmed %d", len(whole.Spec.Phases), len(lean.Spec.Phases))
		}
		for _, p := range lean.Spec.Phases {
			for _, o := range p.Objects {
				if !o.IsRef() && len(o.Object.Object) > 0 {
					t.Fatalf("an inline object kept its content")
				}
			}
		}
	})
}

// TestTrimArchivedOnlyWhenDone: an Active ClusterObjectSet, one being deleted and one still holding
// the teardown finalizer keep their objects.
func TestTrimArchivedOnlyWhenDone(t *testing.T) {
	spec := []byte{0xc0, 0, 0, 0}
	now := metav1.Now()
	for name, change := range map[string]func(*olmv1.ClusterObjectSet){
		"active":            func(c *olmv1.ClusterObjectSet) { c.Spec.LifecycleState = olmv1.LifecycleStateActive },
		"being deleted":     func(c *olmv1.ClusterObjectSet) { c.DeletionTimestamp = &now },
		"teardown not over": func(c *olmv1.ClusterObjectSet) { c.Finalizers = []string{finalizerowner.Teardown} },
	} {
		t.Run(name, func(t *testing.T) {
			cos := archivedSet(spec)
			change(cos)
			got, _ := clusterObjectSetLean(cos.DeepCopy())
			if n := len(got.(*olmv1.ClusterObjectSet).Spec.Phases[0].Objects); n != 4 {
				t.Errorf("%d objects kept, want 4", n)
			}
		})
	}
	got, _ := clusterObjectSetLean(archivedSet(spec))
	if n := len(got.(*olmv1.ClusterObjectSet).Spec.Phases[0].Objects); n != 1 {
		t.Errorf("archived and done: %d objects kept, want 1", n)
	}
}
