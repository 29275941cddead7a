package controllers

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// TestResolveBusy: a reconcile that finds no room in the reconciler's pool reports busy (its refs
// retryable, naming the flag) and gives back all it held once released, whether it found the pool
// full from the start (it waited, holding nothing, at most poolWait) or ran out of room after its
// first value (refused at once, holding room); with room it resolves.
func TestResolveBusy(t *testing.T) {
	const ns = "olmv1-system"
	values := map[string][]byte{}
	var secrets []*corev1.Secret
	for _, name := range []string{"a", "b"} {
		v := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"},"data":{"k":"` + strings.Repeat("x", 1000) + `"}}`)
		values[name] = v
		secrets = append(secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Immutable: ptr.To(true),
			Data: map[string][]byte{content.Key(v): v}})
	}
	cost := func(v []byte) int64 {
		b := content.NewBudget(0)
		if _, err := b.Resolve(context.Background(), "x", v, content.Key(v)); err != nil {
			t.Fatal(err)
		}
		return b.Used()
	}(values["a"])
	cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: olmv1.ClusterObjectSetSpec{Phases: []olmv1.ClusterObjectSetPhase{{
		Name: "p", Objects: []olmv1.ClusterObjectSetObject{
			{Ref: olmv1.ObjectSourceRef{Name: "a", Key: content.Key(values["a"])}},
			{Ref: olmv1.ObjectSourceRef{Name: "b", Key: content.Key(values["b"])}},
		},
	}}}}

	type outcome struct {
		Busy      bool
		Retryable bool
		Resolved  []bool
		HeldAfter int64 // the pool's, after release (others' hold included)
	}
	tests := map[string]struct {
		capacity, othersHold int64
		want                 outcome
	}{
		"room for both":                {capacity: 2 * cost, want: outcome{Resolved: []bool{true, true}}},
		"full from the start":          {capacity: 2 * cost, othersHold: 2 * cost, want: outcome{Busy: true, Retryable: true, Resolved: []bool{false, false}, HeldAfter: 2 * cost}},
		"room for one: the second not": {capacity: 3 * cost, othersHold: cost + 1, want: outcome{Busy: true, Retryable: true, Resolved: []bool{true, false}, HeldAfter: cost + 1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := make([]*corev1.Secret, len(secrets))
			for i, s := range secrets {
				objs[i] = s.DeepCopy()
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs[0], objs[1]).Build()
			pool := content.NewPool(tc.capacity)
			others := pool.NewBudget(0)
			if err := others.Hold(tc.othersHold); err != nil {
				t.Fatal(err)
			}
			defer others.Release()
			r := &ClusterObjectSetReconciler{Metrics: NewMetrics(), Client: c, APIReader: c, SystemNamespace: ns, Resolve: secretdata.ResolveMemory{Pool: pool}, contents: newSecretContents(1 << 20)}
			out, unres, release := r.resolve(context.Background(), cos)
			release()
			got := outcome{Busy: unres.busy, Retryable: unres.retryable != "", HeldAfter: pool.Used()}
			for _, o := range out[0] {
				got.Resolved = append(got.Resolved, o != nil)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\nblocking %q, retryable %q", diff, unres.blocking, unres.retryable)
			}
			if unres.busy && !strings.Contains(unres.retryable, "(--max-concurrent-resolved-bytes)") {
				t.Errorf("the retryable message does not name the flag: %q", unres.retryable)
			}
		})
	}
}
