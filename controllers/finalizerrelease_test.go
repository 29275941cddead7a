package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func TestFinalizedByUs(t *testing.T) {
	fields := func(manager, finalizer string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:finalizers":{".":{},"v:\"` + finalizer + `\"":{}}}}`)}
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
		"managed fields that do not parse": {finalizers: []string{Finalizer}, managed: []metav1.ManagedFieldsEntry{{Manager: FieldOwner, FieldsV1: metav1.NewFieldsV1("{")}}},
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
