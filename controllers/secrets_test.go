package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

func cosRef(name, uid string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: name,
		UID: types.UID("uid-" + uid), Controller: ptr.To(controller), BlockOwnerDeletion: ptr.To(controller)}
}

func TestOwnerRefsFor(t *testing.T) {
	cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "uid-new"}}
	ours := cosRef("x", "new", true)
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keeper", UID: "uid-cm"}
	otherController := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "uid-d", Controller: ptr.To(true)}
	tests := map[string]struct {
		refs   []metav1.OwnerReference
		want   []metav1.OwnerReference
		change bool
	}{
		"no owner: ours added":           {refs: nil, want: []metav1.OwnerReference{ours}, change: true},
		"already ours":                   {refs: []metav1.OwnerReference{ours}, want: []metav1.OwnerReference{ours}},
		"earlier one of the same name":   {refs: []metav1.OwnerReference{cosRef("x", "old", true)}, want: []metav1.OwnerReference{ours}, change: true},
		"earlier one beside ours":        {refs: []metav1.OwnerReference{ours, cosRef("x", "old", false)}, want: []metav1.OwnerReference{ours}, change: true},
		"another owner is kept":          {refs: []metav1.OwnerReference{other, cosRef("x", "old", true)}, want: []metav1.OwnerReference{other, ours}, change: true},
		"controlled by something else":   {refs: []metav1.OwnerReference{otherController}, want: []metav1.OwnerReference{otherController}},
		"controlled by another COS name": {refs: []metav1.OwnerReference{cosRef("y", "y", true)}, want: []metav1.OwnerReference{cosRef("y", "y", true)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, change := ownerRefsFor(tc.refs, cos)
			if change != tc.change {
				t.Errorf("change = %v, want %v", change, tc.change)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("owner references (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOrphaned(t *testing.T) {
	created := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	grace := 5 * time.Minute
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
	usedAt := func(t time.Time) func(*corev1.Secret) {
		return func(s *corev1.Secret) {
			s.Annotations = map[string]string{content.LastUsedAnnotation: t.Format(time.RFC3339)}
		}
	}
	referencing := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "uid-x"}, Spec: olmv1.ClusterObjectSetSpec{
		Phases: []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: []olmv1.ClusterObjectSetObject{{Ref: olmv1.ObjectSourceRef{Name: "x-0123456789abcdef", Key: "k"}}}}}}}
	other := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "uid-x"}}
	tests := map[string]struct {
		sec  *corev1.Secret
		cos  *olmv1.ClusterObjectSet
		now  time.Time
		want bool
	}{
		"young, no ClusterObjectSet":            {sec: secret(), now: created.Add(grace - time.Second)},
		"past grace, no ClusterObjectSet":       {sec: secret(), now: created.Add(grace), want: true},
		"past grace since creation, used since": {sec: secret(usedAt(created.Add(time.Hour))), now: created.Add(time.Hour + grace - time.Second)},
		"past grace since its last use":         {sec: secret(usedAt(created.Add(time.Hour))), now: created.Add(time.Hour + grace), want: true},
		"an unparsable last use is ignored":     {sec: secret(func(s *corev1.Secret) { s.Annotations = map[string]string{content.LastUsedAnnotation: "soon"} }), now: created.Add(grace), want: true},
		"a last use before creation is ignored": {sec: secret(usedAt(created.Add(-time.Hour))), now: created.Add(grace), want: true},
		"referenced":                            {sec: secret(), cos: referencing, now: created.Add(time.Hour)},
		"owned":                                 {sec: secret(func(s *corev1.Secret) { s.OwnerReferences = []metav1.OwnerReference{{UID: "uid-x"}} }), cos: other, now: created.Add(time.Hour)},
		"neither referenced nor owned":          {sec: secret(), cos: other, now: created.Add(time.Hour), want: true},
		"another type":                          {sec: secret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), now: created.Add(time.Hour)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := orphaned(tc.sec, tc.cos, "sys", tc.now, grace); got != tc.want {
				t.Errorf("orphaned = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFinalizedByUs(t *testing.T) {
	fields := func(manager, finalizer string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:finalizers":{".":{},"v:\"` + finalizer + `\"":{}}}}`)}}
	}
	tests := map[string]struct {
		finalizers []string
		managed    []metav1.ManagedFieldsEntry
		want       bool
	}{
		"added by us":                      {finalizers: []string{Finalizer}, managed: []metav1.ManagedFieldsEntry{fields(FieldOwner, Finalizer)}, want: true},
		"added by another manager":         {finalizers: []string{Finalizer}, managed: []metav1.ManagedFieldsEntry{fields("operator-controller", Finalizer)}},
		"we added another finalizer":       {finalizers: []string{Finalizer}, managed: []metav1.ManagedFieldsEntry{fields(FieldOwner, "example.com/other")}},
		"no finalizer left":                {managed: []metav1.ManagedFieldsEntry{fields(FieldOwner, Finalizer)}},
		"no managed fields":                {finalizers: []string{Finalizer}},
		"managed fields that do not parse": {finalizers: []string{Finalizer}, managed: []metav1.ManagedFieldsEntry{{Manager: FieldOwner, FieldsV1: &metav1.FieldsV1{Raw: []byte("{")}}}},
		"ours among others":                {finalizers: []string{"a", Finalizer}, managed: []metav1.ManagedFieldsEntry{fields("kubectl", "a"), fields(FieldOwner, Finalizer)}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Finalizers: tc.finalizers, ManagedFields: tc.managed}}
			if got := finalizedByUs(cos); got != tc.want {
				t.Errorf("finalizedByUs = %v, want %v", got, tc.want)
			}
		})
	}
}
