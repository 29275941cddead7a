package admission_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
)

// TestTouchUserRefs: a create that references existing object-data Secrets of the system namespace
// writes each once before it is stored (the serialization point with the orphan sweep); a dry run,
// refs elsewhere and Secrets of another type are not written.
func TestTouchUserRefs(t *testing.T) {
	secret := func(name string, typ corev1.SecretType) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: typ,
			Data: map[string][]byte{"k": []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`)}}
	}
	ref := func(namespace, name string) olmv1.ClusterObjectSetObject {
		return olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Namespace: namespace, Name: name, Key: "k"}}
	}
	data := types.NamespacedName{Namespace: ns, Name: "data"}
	opaque := types.NamespacedName{Namespace: ns, Name: "opaque"}
	refs := b.COS("copied", b.WithPhase("configuration", ref("", "data"), ref(ns, "data"), ref("", "opaque"), ref("", "missing"), ref("default", "data")))
	tests := map[string]struct {
		op       admission.Operation
		old, new *olmv1.ClusterObjectSet
		dryRun   bool
		fail     bool
		want     map[types.NamespacedName]int
		refused  admission.Reason
	}{
		"a refs-only create touches each object-data Secret once": {op: admission.Create, new: refs, want: map[types.NamespacedName]int{data: 1}},
		"a dry run touches nothing":                               {op: admission.Create, new: refs, dryRun: true, want: map[types.NamespacedName]int{}},
		"filling an empty ClusterObjectSet touches as a create does": {op: admission.Update, old: b.COS("copied"), new: refs,
			want: map[types.NamespacedName]int{data: 1}},
		"a touch that fails refuses, retryably": {op: admission.Create, new: refs, fail: true, want: map[types.NamespacedName]int{},
			refused: admission.ReasonWriteFailed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			store := admissiontest.NewStore(ns)
			store.AddSecret(secret("data", olmv1.SecretTypeObjectData))
			store.AddSecret(secret("opaque", corev1.SecretTypeOpaque))
			if tc.fail {
				store.FailReads(data, errors.New("the API server is away"))
			}
			if tc.old != nil {
				store.AddClusterObjectSet(tc.old)
			}
			p := &admission.Pipeline{Store: store, SystemNamespace: ns, Mode: admission.ModeOversized, Threshold: admission.DefaultThreshold}
			resp := p.Admit(context.Background(), admission.Request{Operation: tc.op, Old: tc.old, New: tc.new.DeepCopy(), SpecSize: 100, DryRun: tc.dryRun})
			var refused admission.Reason
			if resp.Refusal != nil {
				refused = resp.Refusal.Reason
				if tc.refused != "" && resp.Refusal.Code != 503 {
					t.Errorf("refusal code %d, want 503", resp.Refusal.Code)
				}
			}
			if refused != tc.refused {
				t.Errorf("refusal %q, want %q (%v)", refused, tc.refused, resp.Refusal)
			}
			got := map[types.NamespacedName]int{}
			for _, k := range []types.NamespacedName{data, opaque, {Namespace: ns, Name: "missing"}, {Namespace: "default", Name: "data"}} {
				if n := store.Touched(k); n > 0 {
					got[k] = n
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("touched (-want +got):\n%s", diff)
			}
		})
	}
}
