package finalizerowner

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	teardown = "olm.operatorframework.io/teardown"
	ours     = "cos-externalizer"
	olm      = "operator-controller"
)

// entry is a managedFields entry of manager whose fieldsV1 is raw.
func entry(manager, raw string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(raw)}
}

// owning is the fieldsV1 of an entry that owns the finalizers named.
func owning(finalizers ...string) string {
	raw := `{"f:metadata":{"f:finalizers":{".":{}`
	for _, f := range finalizers {
		raw += `,"v:\"` + f + `\"":{}`
	}
	return raw + `}}}`
}

func TestDecide(t *testing.T) {
	for name, tc := range map[string]struct {
		finalizers []string
		managed    []metav1.ManagedFieldsEntry
		want       Decision
	}{
		"no finalizer": {
			managed: []metav1.ManagedFieldsEntry{entry(ours, owning(teardown))},
			want:    Decision{Action: Absent},
		},
		"ours alone": {
			finalizers: []string{teardown},
			managed:    []metav1.ManagedFieldsEntry{entry(ours, owning(teardown)), entry("kubectl", `{"f:spec":{}}`)},
			want:       Decision{Action: Release, Owners: []string{ours}, Keep: []string{}},
		},
		"ours among others, order kept": {
			finalizers: []string{"orphan", teardown, "example.com/hold"},
			managed:    []metav1.ManagedFieldsEntry{entry(ours, owning(teardown)), entry("other", owning("example.com/hold"))},
			want:       Decision{Action: Release, Owners: []string{ours}, Keep: []string{"orphan", "example.com/hold"}},
		},
		"ours in two entries (apply and update)": {
			finalizers: []string{teardown},
			managed:    []metav1.ManagedFieldsEntry{entry(ours, owning(teardown)), entry(ours, owning(teardown))},
			want:       Decision{Action: Release, Owners: []string{ours}, Keep: []string{}},
		},
		"OLM's": {
			finalizers: []string{teardown},
			managed:    []metav1.ManagedFieldsEntry{entry(olm, owning(teardown))},
			want:       Decision{Action: Foreign, Owners: []string{olm}},
		},
		"OLM's and ours": {
			finalizers: []string{teardown},
			managed:    []metav1.ManagedFieldsEntry{entry(ours, owning(teardown)), entry(olm, owning(teardown))},
			want:       Decision{Action: Foreign, Owners: []string{ours, olm}},
		},
		"ours owns another finalizer only": {
			finalizers: []string{teardown},
			managed:    []metav1.ManagedFieldsEntry{entry(ours, owning("example.com/other"))},
			want:       Decision{Action: Unowned},
		},
		"managedFields cleared": {
			finalizers: []string{teardown},
			want:       Decision{Action: Unowned},
		},
		"unreadable fieldsV1 owns nothing": {
			finalizers: []string{teardown},
			managed:    []metav1.ManagedFieldsEntry{entry(ours, `{"f:metadata":`), {Manager: ours}},
			want:       Decision{Action: Unowned},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.finalizers, tc.managed, teardown, ours)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOwners(t *testing.T) {
	for name, tc := range map[string]struct {
		managed []metav1.ManagedFieldsEntry
		want    []string
	}{
		"none":           {},
		"sorted, once":   {managed: []metav1.ManagedFieldsEntry{entry("z", owning(teardown)), entry("a", owning(teardown)), entry("z", owning(teardown))}, want: []string{"a", "z"}},
		"other elements": {managed: []metav1.ManagedFieldsEntry{entry("a", owning("x", "y"))}},
		"a name that only looks alike": {
			managed: []metav1.ManagedFieldsEntry{entry("a", owning(teardown+"-not"))},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Owners(tc.managed, teardown)); diff != "" {
				t.Errorf("Owners (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecide: whatever the managedFields hold, Decide does not panic, releases only a finalizer our
// manager alone owns, and keeps every other finalizer in order.
func FuzzDecide(f *testing.F) {
	f.Add(owning(teardown), ours, teardown+",orphan")
	f.Add(owning(teardown, "orphan"), olm, teardown)
	f.Add(`{"f:metadata":{"f:finalizers":{"v:\"olm.operatorframework.io/teardown\"":{"x":1}}}}`, ours, teardown)
	f.Add(`not json`, ours, "")
	f.Fuzz(func(t *testing.T, raw, manager, list string) {
		var finalizers []string
		if list != "" {
			finalizers = strings.Split(list, ",")
		}
		managed := []metav1.ManagedFieldsEntry{entry(manager, raw)}
		d := Decide(finalizers, managed, teardown, ours)
		if d.Action != Release {
			if d.Keep != nil {
				t.Fatalf("%s with a list to keep: %q", d.Action, d.Keep)
			}
			return
		}
		if !slices.Equal(Owners(managed, teardown), []string{ours}) {
			t.Fatalf("released a finalizer owned by %q", Owners(managed, teardown))
		}
		want := slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return f == teardown })
		if !slices.Equal(d.Keep, want) {
			t.Fatalf("kept %q of %q, want %q", d.Keep, finalizers, want)
		}
	})
}
