package admission_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
)

// TestUserRefReadsAreCharged: a refs-only create naming n Secrets (each by two refs) reads each once,
// charged to the request's Budget before it is read and given back once checked, so the request
// holds at most one Secret at a time; with no room for one read, it is refused with 429 before it
// reads, touches or writes anything.
func TestUserRefReadsAreCharged(t *testing.T) {
	const (
		n = 20
		// held is what the request holds before it reads (its decoded objects, webhook.admit).
		held = 1 << 20
	)
	value := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`)
	var objs []olmv1.ClusterObjectSetObject
	for i := range n {
		name := fmt.Sprintf("data-%d", i)
		objs = append(objs, olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: name, Key: "k"}},
			olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: name, Key: "absent"}})
	}
	objs = append(objs, olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: "missing", Key: "k"}})
	cos := b.COS("copied", b.WithPhase("configuration", objs...))
	type result struct {
		Refused   admission.Reason
		Code      int32
		Reads     int  // GetSecret calls
		OneByOne  bool // every read saw the request hold exactly one read's charge more
		Warnings  int
		Touched   int
		HeldAfter int64
	}
	tests := map[string]struct {
		capacity int64
		want     result
	}{
		"room for one read at a time: each Secret read once, one at a time": {capacity: held + secretdata.ReadCost,
			want: result{Reads: n + 1, OneByOne: true, Warnings: n + 1, Touched: n, HeldAfter: held}},
		"no room for one read: 429, nothing read, touched or written": {capacity: held + secretdata.ReadCost - 1,
			want: result{Refused: admission.ReasonBusy, Code: http.StatusTooManyRequests, OneByOne: true, HeldAfter: held}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pool := content.NewPool(tc.capacity)
			budget := pool.NewBudget(0)
			defer budget.Release()
			if err := budget.Hold(held); err != nil {
				t.Fatal(err)
			}
			store := admissiontest.NewStore(ns)
			for i := range n {
				store.AddSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("data-%d", i)},
					Type: olmv1.SecretTypeObjectData, Data: map[string][]byte{"k": value}})
			}
			got := result{OneByOne: true}
			store.OnGetSecret = func(context.Context, types.NamespacedName) {
				got.Reads++
				if used := pool.Used(); used != held+secretdata.ReadCost {
					got.OneByOne = false
					t.Logf("read %d: the request holds %d, want %d", got.Reads, used, held+secretdata.ReadCost)
				}
			}
			p := &admission.Pipeline{Store: store, SystemNamespace: ns, Mode: admission.ModeOversized, Threshold: admission.DefaultThreshold, Budget: budget}
			resp := p.Admit(context.Background(), admission.Request{Operation: admission.Create, New: cos.DeepCopy(), SpecSize: 100})
			if resp.Refusal != nil {
				got.Refused, got.Code = resp.Refusal.Reason, resp.Refusal.Code
				if !strings.Contains(resp.Refusal.Err.Error(), "no room") {
					t.Errorf("the refusal does not say why: %v", resp.Refusal.Err)
				}
			}
			got.Warnings = len(resp.Warnings)
			for _, key := range store.Secrets() {
				got.Touched += store.Touched(key)
			}
			// The touch reads nothing through GetSecret in this Store: the reads are checkUserRefs'.
			got.HeldAfter = pool.Used()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
