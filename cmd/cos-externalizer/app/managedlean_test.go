package app

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/drift"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/probes"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// leanMetadata is what the cache of managed objects holds of live (a whole object as the API server
// returns it), as the reconciler reads it: decoded as metadata, through managedObjectLean, and back
// to a map as controllers.metadataObject builds it (fieldsV1 as maps, the stashed digest among the
// annotations, no selfLink).
func leanMetadata(t *testing.T, live map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(live)
	if err != nil {
		t.Fatal(err)
	}
	meta := &metav1.PartialObjectMetadata{}
	if err := json.Unmarshal(raw, meta); err != nil {
		t.Fatal(err)
	}
	// Twice, as an informer's initial list may transform it.
	for range 2 {
		if _, err := managedObjectLean(meta); err != nil {
			t.Fatal(err)
		}
	}
	if raw, err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	md := out["metadata"].(map[string]any)
	delete(md, "selfLink")
	if annotations := drift.CachedAnnotations(&meta.ObjectMeta); annotations != nil {
		md["annotations"] = annotations
	}
	return out
}

// TestManagedObjectLeanKeepsDecisions: what the metadata cache leaves out (annotations but the
// digest; nothing of the labels) changes no decision: the no-op decision on the lean metadata is the
// one on the whole object (or asks for the content, never the case here: ConfigMap data is granular),
// and a custom probe selecting by label selects the same objects. In particular a label of ours that
// someone else changes or removes is still drift, and labels and annotations others add are not.
func TestManagedObjectLeanKeepsDecisions(t *testing.T) {
	const (
		digest = "sha256:0123"
		owning = "cos-a-r1"
	)
	desired := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "cm", "namespace": "ns",
			"labels":      map[string]any{olmv1.LabelOwningRevision: owning, "app": "web"},
			"annotations": map[string]any{drift.Annotation: digest},
		},
		"data": map[string]any{"k": "v"},
	}
	ours := `{"f:data":{"f:k":{}},"f:metadata":{"f:annotations":{"f:` + drift.Annotation + `":{}},"f:labels":{"f:app":{},"f:` + olmv1.LabelOwningRevision + `":{}},"f:ownerReferences":{"k:{\"uid\":\"u1\"}":{}}}}`
	oursWithoutApp := `{"f:data":{"f:k":{}},"f:metadata":{"f:annotations":{"f:` + drift.Annotation + `":{}},"f:labels":{"f:` + olmv1.LabelOwningRevision + `":{}},"f:ownerReferences":{"k:{\"uid\":\"u1\"}":{}}}}`
	entry := func(manager, op, fields string) map[string]any {
		var f map[string]any
		if err := json.Unmarshal([]byte(fields), &f); err != nil {
			t.Fatal(err)
		}
		return map[string]any{"manager": manager, "operation": op, "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": f}
	}
	live := func(labels, annotations map[string]any, managed ...map[string]any) map[string]any {
		entries := make([]any, len(managed))
		for i, e := range managed {
			entries[i] = e
		}
		return map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{
				"name": "cm", "namespace": "ns", "uid": "u2", "resourceVersion": "7",
				"labels": labels, "annotations": annotations, "managedFields": entries,
				"ownerReferences": []any{map[string]any{"apiVersion": olmv1.GroupVersion.String(), "kind": olmv1.ClusterObjectSetKind, "name": "cos-a-r1", "uid": "u1", "controller": true}},
			},
			"data": map[string]any{"k": "v"},
		}
	}
	ourLabels := map[string]any{olmv1.LabelOwningRevision: owning, "app": "web"}
	ourAnnotations := map[string]any{drift.Annotation: digest}
	labelProbe := func(selector map[string]string) []olmv1.ProgressionProbe {
		return []olmv1.ProgressionProbe{{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchLabels: selector}}}}
	}
	for name, tc := range map[string]struct {
		live       map[string]any
		probes     []olmv1.ProgressionProbe
		unchanged  bool
		reason     string
		needsProbe bool
	}{
		"as applied": {live: live(ourLabels, ourAnnotations, entry("cos-externalizer", "Apply", ours)), unchanged: true},
		"a label of ours changed by someone else": {
			live: live(map[string]any{olmv1.LabelOwningRevision: owning, "app": "db"}, ourAnnotations,
				entry("cos-externalizer", "Apply", oursWithoutApp), entry("kubectl-edit", "Update", `{"f:metadata":{"f:labels":{"f:app":{}}}}`)),
			reason: drift.ReasonField,
		},
		"a label of ours removed": {
			live:   live(map[string]any{olmv1.LabelOwningRevision: owning}, ourAnnotations, entry("cos-externalizer", "Apply", oursWithoutApp)),
			reason: drift.ReasonField,
		},
		"labels and annotations others add": {
			live: live(map[string]any{olmv1.LabelOwningRevision: owning, "app": "web", "team": "x"},
				map[string]any{drift.Annotation: digest, admission.LastAppliedAnnotation: "{}", "note": "n"},
				entry("cos-externalizer", "Apply", ours), entry("kubectl-label", "Update", `{"f:metadata":{"f:annotations":{"f:note":{}},"f:labels":{"f:team":{}}}}`)),
			unchanged: true,
		},
		"the digest changed": {
			live:   live(ourLabels, map[string]any{drift.Annotation: "sha256:other"}, entry("cos-externalizer", "Apply", ours)),
			reason: drift.ReasonDigest,
		},
		"selected by a label others added": {
			live: live(map[string]any{olmv1.LabelOwningRevision: owning, "app": "web", "team": "x"}, ourAnnotations,
				entry("cos-externalizer", "Apply", ours), entry("kubectl-label", "Update", `{"f:metadata":{"f:labels":{"f:team":{}}}}`)),
			probes: labelProbe(map[string]string{"team": "x"}), unchanged: true, needsProbe: true,
		},
		"not selected by a label others changed": {
			live: live(map[string]any{olmv1.LabelOwningRevision: owning, "app": "db"}, ourAnnotations,
				entry("cos-externalizer", "Apply", oursWithoutApp), entry("kubectl-edit", "Update", `{"f:metadata":{"f:labels":{"f:app":{}}}}`)),
			probes: labelProbe(map[string]string{"app": "web"}), reason: drift.ReasonField,
		},
	} {
		t.Run(name, func(t *testing.T) {
			whole := drift.Unchanged(desired, tc.live, "cos-externalizer", digest)
			if whole.Unchanged != tc.unchanged || whole.Reason != tc.reason {
				t.Fatalf("on the whole object: %+v, want unchanged %v reason %q", whole, tc.unchanged, tc.reason)
			}
			lean := leanMetadata(t, tc.live)
			v, needsContent := drift.UnchangedMetadata(desired, lean, "cos-externalizer", digest)
			if needsContent {
				t.Fatalf("on the lean metadata: needs the content")
			}
			if diff := cmp.Diff(whole, v); diff != "" {
				t.Errorf("verdict on the lean metadata (-whole +lean):\n%s", diff)
			}
			leanObj, wholeObj := &unstructured.Unstructured{Object: lean}, &unstructured.Unstructured{Object: tc.live}
			if got, want := probes.NeedsContent(leanObj, tc.probes), probes.NeedsContent(wholeObj, tc.probes); got != want || got != tc.needsProbe {
				t.Errorf("a probe needs the content: %v on the lean metadata, %v on the whole object, want %v", got, want, tc.needsProbe)
			}
		})
	}
}

// TestManagedObjectLeanShares: objects with equal labels hold one label map, with equal owner
// references one slice of them, with equal managedFields one slice of those; each equal to what the
// object had.
func TestManagedObjectLeanShares(t *testing.T) {
	for _, table := range []interface{ reset() }{sharedLabels, sharedOwnerReferences, sharedManagedFields} {
		table.reset()
	}
	object := func(labels map[string]string, owner, fields string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: "x", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "K", Name: owner, UID: types.UID(owner + "-uid")}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}},
		}}
	}
	lean := func(o *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
		want := o.DeepCopy()
		if _, err := managedObjectLean(o); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, o); diff != "" {
			t.Errorf("lean object (-want +got):\n%s", diff)
		}
		return o
	}
	a := lean(object(map[string]string{"k1": "v1", "k2": "v2"}, "o", `{"f:data":{}}`))
	b := lean(object(map[string]string{"k2": "v2", "k1": "v1"}, "o", `{"f:data":{}}`))
	c := lean(object(map[string]string{"k1": "v1", "k2": "other"}, "p", `{"f:data":{"f:x":{}}}`))
	d := lean(object(map[string]string{"k1": "v1k2", "": "v2"}, "o", `{"f:data":{}}`))
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	for name, tc := range map[string]struct {
		got, want bool
	}{
		"equal labels share a map":               {got: same(a.Labels, b.Labels), want: true},
		"equal owner references share a slice":   {got: same(a.OwnerReferences, b.OwnerReferences), want: true},
		"equal managedFields share a slice":      {got: same(a.ManagedFields, b.ManagedFields), want: true},
		"other labels have their own map":        {got: same(a.Labels, c.Labels), want: false},
		"other owner references have their own":  {got: same(a.OwnerReferences, c.OwnerReferences), want: false},
		"other managedFields have their own":     {got: same(a.ManagedFields, c.ManagedFields), want: false},
		"labels are told apart by their lengths": {got: same(a.Labels, d.Labels), want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

// TestShareTable: the table hands out the first value stored under a key for every equal one, and
// not for an unequal one (a collision of keys) or one too large to share; it forgets a key after
// two generations of other keys, and a key looked up in the older generation is kept.
func TestShareTable(t *testing.T) {
	table := newShareTable(func(a, b *int) bool { return *a == *b })
	key := func(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }
	share := func(k string, n, size int) *int { return table.share(key(k), &n, size, func() *int { return &n }) }
	first := share("a", 1, 1)
	for name, tc := range map[string]struct {
		got  *int
		same bool
	}{
		"an equal value":                    {got: share("a", 1, 1), same: true},
		"an unequal value under the key":    {got: share("a", 2, 1), same: false},
		"an equal value too large to share": {got: share("a", 1, shareLargest+1), same: false},
	} {
		t.Run(name, func(t *testing.T) {
			if same := tc.got == first; same != tc.same {
				t.Errorf("the first value handed out: %v, want %v", same, tc.same)
			}
		})
	}
	b := share("b", 3, 1)
	others := func(prefix string, n int) {
		for i := range n {
			share(fmt.Sprint(prefix, i), i, 1)
		}
	}
	// a and b in generation 1, filled by others; a is looked up in generation 2 and moves there;
	// generation 3 starts: b is forgotten, a is not.
	others("x", shareKeys-2)
	others("y", 1)
	if got := share("a", 1, 1); got != first {
		t.Fatal("a was forgotten after one generation")
	}
	others("z", shareKeys)
	for name, tc := range map[string]struct {
		first *int
		kept  bool
	}{"a": {first, true}, "b": {b, false}} {
		t.Run(name+" after two generations", func(t *testing.T) {
			if kept := share(name, *tc.first, 1) == tc.first; kept != tc.kept {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
		})
	}
}

func (t *shareTable[V]) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur, t.prev, t.curBytes = nil, nil, 0
}

// BenchmarkManagedObjectMetadataHeld reports the heap a cached managed object's metadata holds
// (B/object), as decoded and as managedObjectLean keeps it, for the objects of the scale benchmark
// (test/bench/scale: revisions of 6 ServiceAccounts and 24 ConfigMaps, metadata as the API server
// returns it after our apply).
func BenchmarkManagedObjectMetadataHeld(b *testing.B) {
	const revisions, perRevision = 200, 30
	var raws [][]byte
	for r := range revisions {
		owner := fmt.Sprintf("%08x-13ae-47ca-beeb-fe7f607616ed", r)
		for i := range perRevision {
			kind, data := "ConfigMap", `"f:data":{"f:payload":{},"f:revision":{}},`
			if i < 6 {
				kind, data = "ServiceAccount", ""
			}
			raws = append(raws, fmt.Appendf(nil, `{"apiVersion":"v1","kind":%q,"metadata":{
				"annotations":{%q:"sha256:%064x"},"creationTimestamp":"2026-11-27T23:32:55Z",
				"labels":{%q:"ext-%03d-r5"},
				"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{%s"f:metadata":{"f:annotations":{"f:%s":{}},"f:labels":{"f:%s":{}},"f:ownerReferences":{"k:{\"uid\":\"%s\"}":{}}}},"manager":"cos-externalizer","operation":"Apply","time":"2026-11-27T23:32:55Z"}],
				"name":"ext-%03d-%d","namespace":"scale-%02d",
				"ownerReferences":[{"apiVersion":"olm.operatorframework.io/v1","blockOwnerDeletion":true,"controller":true,"kind":"ClusterObjectSet","name":"ext-%03d-r5","uid":%q}],
				"resourceVersion":"%d","uid":"%08x-%04x-4bf6-bd9b-0ed92b57ff44"}}`,
				kind, drift.Annotation, r*perRevision+i, olmv1.LabelOwningRevision, r, data, drift.Annotation, olmv1.LabelOwningRevision, owner,
				r, i, r%20, r, owner, 1000+r*perRevision+i, r, i))
		}
	}
	for name, lean := range map[string]bool{"decoded": false, "lean": true} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for _, table := range []interface{ reset() }{sharedLabels, sharedOwnerReferences, sharedManagedFields} {
					table.reset()
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				held := make([]*metav1.PartialObjectMetadata, len(raws))
				for i, raw := range raws {
					meta := &metav1.PartialObjectMetadata{}
					if err := json.Unmarshal(raw, meta); err != nil {
						b.Fatal(err)
					}
					if lean {
						if _, err := managedObjectLean(meta); err != nil {
							b.Fatal(err)
						}
					}
					held[i] = meta
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(held)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(len(raws)), "B/object")
			}
		})
	}
}
