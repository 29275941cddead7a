package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// countingReader counts the reads that pass through it to the API server: lists counts pages,
// listsStarted the Lists (their first pages).
type countingReader struct {
	client.Reader
	gets, lists, listsStarted atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	if lo := (&client.ListOptions{}).ApplyOptions(opts); lo.Continue == "" {
		c.listsStarted.Add(1)
	}
	return c.Reader.List(ctx, list, opts...)
}

// deleteReview is the review of a DELETE of sec by alice, as the API server (or a forger) sends it.
func deleteReview(t *testing.T, sec *corev1.Secret) admission.Request {
	t.Helper()
	raw, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete, Namespace: sec.Namespace, Name: sec.Name,
		OldObject: runtime.RawExtension{Raw: raw}, UserInfo: authenticationv1.UserInfo{Username: "alice"},
	}}
}

// TestSecretGuardConfirmsUnusedUncached: a GitOps wave pruned wave-1 and created wave-2 with wave-1's
// refs; the guard's cache has not seen wave-2 yet, and neither the Secret's label nor its owners name
// it. The guard confirms "no users" with an uncached List before it admits the delete, and refuses.
func TestSecretGuardConfirmsUnusedUncached(t *testing.T) {
	ctx := context.Background()
	testenv.Env.RemoveAfter(t, "guard-wave-2")
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "guard-wave-content",
		Labels: map[string]string{olmv1.LabelRevisionName: "guard-wave-1"}},
		Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{"k": []byte("{}")}}
	if err := testenv.Env.Client.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testenv.Env.Client.Delete(context.Background(), sec) })
	wave2 := builders.COS("guard-wave-2", builders.WithPhase("configuration", builders.Ref(sec.Name, "", "k")))
	if err := testenv.Env.Client.Create(ctx, wave2); err != nil {
		t.Fatal(err)
	}
	reader := &countingReader{Reader: testenv.Env.Client}
	guard := &webhook.SecretGuard{Cache: frozenCache{}, APIReader: reader, Metrics: webhook.NewMetrics(),
		Options: webhook.Options{SystemNamespace: testenv.SystemNamespace}}
	resp := guard.Handle(ctx, deleteReview(t, sec))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "holds objects of ClusterObjectSet guard-wave-2") {
		t.Fatalf("deleting a Secret that a ClusterObjectSet the cache has not seen references: want a refusal naming it, got allowed=%v %v", resp.Allowed, resp.Result)
	}
	if got := reader.gets.Load(); got != 1 { // the label's guard-wave-1, gone
		t.Errorf("%d uncached GETs, want 1", got)
	}
	// Once wave-2 is gone, the same confirmation admits the delete.
	if err := testenv.Env.Client.Delete(ctx, wave2); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(ctx, t, testenv.Env.Client, wave2)
	if resp := guard.Handle(ctx, deleteReview(t, sec)); !resp.Allowed {
		t.Errorf("deleting a Secret nobody references: %v", resp.Result)
	}
}

// TestSecretGuardReadsAreBounded: a forged DELETE review carrying 2,000 ownerReferences to
// ClusterObjectSets (which made 2,001 uncached GETs) makes no GET and one List of ClusterObjectSets.
func TestSecretGuardReadsAreBounded(t *testing.T) {
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "guard-forged",
		Labels: map[string]string{olmv1.LabelRevisionName: "guard-forged"}}, Type: olmv1.SecretTypeObjectData}
	for i := range 2000 {
		sec.OwnerReferences = append(sec.OwnerReferences, metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(),
			Kind: olmv1.ClusterObjectSetKind, Name: fmt.Sprintf("forged-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))})
	}
	all := &olmv1.ClusterObjectSetList{}
	if err := testenv.Env.Client.List(ctx, all); err != nil {
		t.Fatal(err)
	}
	pages := int64(len(all.Items)/50 + 1) // the guard's page of 50
	cached := frozenCache{}
	for i := range 20 {
		cached.items = append(cached.items, *builders.COS(fmt.Sprintf("cached-%d", i)))
	}
	for name, cache := range map[string]frozenCache{"2,000 forged owners": {}, "2,000 forged owners and 20 referrers in the cache": cached} {
		t.Run(name, func(t *testing.T) {
			reader := &countingReader{Reader: testenv.Env.Client}
			guard := &webhook.SecretGuard{Cache: cache, APIReader: reader, Metrics: webhook.NewMetrics(),
				Options: webhook.Options{SystemNamespace: testenv.SystemNamespace}}
			resp := guard.Handle(ctx, deleteReview(t, sec))
			if !resp.Allowed {
				t.Errorf("a Secret nobody references: %v", resp.Result)
			}
			gets, lists := reader.gets.Load(), reader.lists.Load()
			if gets != 0 || lists > pages+1 {
				t.Errorf("%d GETs and %d List pages, want none and at most %d", gets, lists, pages+1)
			}
			t.Logf("%d GETs, %d List pages (%d ClusterObjectSets)", gets, lists, len(all.Items))
		})
	}
}

// TestSecretGuardListsAreShared: 50 concurrent DELETE reviews of unused Secrets, each confirmed by an
// uncached List, share the Lists of one replica: one runs at a time, and the next starts only after
// a pause of at least 250 ms (the guard's least), so however the reviews trickle in (each reads the
// ClusterObjectSet its label names first), the Lists started are at most one plus one per 250 ms the
// reviews took (before: 28 Lists for 50 reviews).
func TestSecretGuardListsAreShared(t *testing.T) {
	const reviews = 50
	reader := &countingReader{Reader: testenv.Env.Client}
	guard := &webhook.SecretGuard{Cache: frozenCache{}, APIReader: reader, Metrics: webhook.NewMetrics(),
		Options: webhook.Options{SystemNamespace: testenv.SystemNamespace}}
	start := time.Now()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for i := range reviews {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: fmt.Sprintf("guard-shared-%d-0123456789abcdef", i),
			Labels: map[string]string{olmv1.LabelRevisionName: fmt.Sprintf("guard-shared-%d", i)}}, Type: olmv1.SecretTypeObjectData}
		review := deleteReview(t, sec)
		wg.Go(func() {
			if resp := guard.Handle(context.Background(), review); !resp.Allowed {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	started, gets := reader.listsStarted.Load(), reader.gets.Load()
	t.Logf("%d reviews in %v: %d uncached Lists (%d pages), %d GETs", reviews, took.Round(time.Millisecond), started, reader.lists.Load(), gets)
	if refused.Load() > 0 {
		t.Errorf("%d deletes of Secrets nobody references refused", refused.Load())
	}
	if bound := 1 + int64(took/(250*time.Millisecond)); started > bound {
		t.Errorf("%d Lists started in %v, more than %d: one per pause", started, took, bound)
	}
	if gets != reviews {
		t.Errorf("%d GETs, want %d (the ClusterObjectSet each label names)", gets, reviews)
	}
}
