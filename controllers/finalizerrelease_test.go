package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

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
		"shared with OLM's reconciler":     {finalizers: []string{Finalizer}, managed: []metav1.ManagedFieldsEntry{fields(FieldOwner, Finalizer), fields("operator-controller", Finalizer)}},
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

// TestPredicates: which ClusterObjectSet events wake the finalizer release (webhook-only mode) and,
// beyond spec, label and annotation changes, the rollout controller.
func TestPredicates(t *testing.T) {
	now := metav1.Now()
	cos := func(deleting bool, finalizers ...string) *olmv1.ClusterObjectSet {
		c := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: finalizers}}
		if deleting {
			c.DeletionTimestamp = &now
		}
		return c
	}
	tests := map[string]struct {
		ev                       any
		wantRelease, wantRollout bool
	}{
		"created":                       {ev: event.CreateEvent{Object: cos(false)}, wantRollout: true},
		"found being deleted":           {ev: event.CreateEvent{Object: cos(true, Finalizer)}, wantRelease: true, wantRollout: true},
		"deletion starts":               {ev: event.UpdateEvent{ObjectOld: cos(false, Finalizer), ObjectNew: cos(true, Finalizer)}, wantRelease: true, wantRollout: true},
		"a finalizer added":             {ev: event.UpdateEvent{ObjectOld: cos(false), ObjectNew: cos(false, Finalizer)}, wantRollout: true},
		"a status write":                {ev: event.UpdateEvent{ObjectOld: cos(false, Finalizer), ObjectNew: cos(false, Finalizer)}},
		"a finalizer gone, deleting":    {ev: event.UpdateEvent{ObjectOld: cos(true, Finalizer, "x"), ObjectNew: cos(true, "x")}, wantRelease: true, wantRollout: true},
		"gone":                          {ev: event.DeleteEvent{Object: cos(true)}, wantRollout: true},
		"a generic event, not deleting": {ev: event.GenericEvent{Object: cos(false)}, wantRollout: true},
	}
	run := func(p predicate.Predicate, ev any) bool {
		switch e := ev.(type) {
		case event.CreateEvent:
			return p.Create(e)
		case event.UpdateEvent:
			return p.Update(e)
		case event.DeleteEvent:
			return p.Delete(e)
		case event.GenericEvent:
			return p.Generic(e)
		}
		panic("unknown event")
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := run(beingDeleted(), tc.ev); got != tc.wantRelease {
				t.Errorf("finalizer release woken = %v, want %v", got, tc.wantRelease)
			}
			if got := run(deletionPredicate(), tc.ev); got != tc.wantRollout {
				t.Errorf("rollout's deletion predicate = %v, want %v", got, tc.wantRollout)
			}
		})
	}
}
