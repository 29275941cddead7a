package webhook

import (
	"context"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
)

// countingStore is a Store that counts every call, reads included.
type countingStore struct {
	*admissiontest.Store
	mu    sync.Mutex
	calls int
}

func (s *countingStore) count() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
}

func (s *countingStore) GetClusterObjectSet(ctx context.Context, name string) (*olmv1.ClusterObjectSet, error) {
	s.count()
	return s.Store.GetClusterObjectSet(ctx, name)
}

func (s *countingStore) GetSecret(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	s.count()
	return s.Store.GetSecret(ctx, key)
}

func (s *countingStore) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	s.count()
	return s.Store.Write(ctx, cosName, plan, dryRun)
}

func (s *countingStore) Touch(ctx context.Context, keys []types.NamespacedName) ([]types.NamespacedName, error) {
	s.count()
	return s.Store.Touch(ctx, keys)
}

// TestHandleAdmitsStaleUpdates: an update whose resourceVersion is not the stored object's is
// admitted as it is, with no patch, no warning, no refusal and no call to the Store, whatever it
// would have been judged (the API server answers it 409 Conflict after mutating admission); the
// same update carrying the stored resourceVersion is judged (refused, patched or written), so each
// case is one the webhook would otherwise answer differently. The decision is
// webhook/admission's StaleUpdate; the API server's answer is test/integration/webhook's
// TestStaleUpdatesConflict.
func TestHandleAdmitsStaleUpdates(t *testing.T) {
	const ns = "olmv1-system"
	inline, stored, secret := externalized(t, "app", 2)
	notOurs := secret.DeepCopy()
	notOurs.Data = map[string][]byte{"other": []byte("{}")}
	empty := b.COS("app", always)
	archivedEmpty := b.COS("app", always, b.WithLifecycleState(olmv1.LifecycleStateArchived))
	refsOnly := stored.DeepCopy()
	refsOnly.Annotations = nil
	other := b.COS("app", always, b.WithPhase("configuration", b.InlineConfigMaps("default", "other", 2)...))

	tests := map[string]struct {
		old, obj *olmv1.ClusterObjectSet
		secrets  []*corev1.Secret
	}{
		"immutable phases":                       {old: stored, obj: other, secrets: []*corev1.Secret{secret}},
		"un-archive with inline objects":         {old: archivedEmpty, obj: inline},
		"un-archive, refs only (check-refs)":     {old: archivedEmpty, obj: refsOnly, secrets: []*corev1.Secret{secret}},
		"fill: would write Secrets":              {old: empty, obj: inline},
		"fill, refs only: would touch Secrets":   {old: empty, obj: refsOnly, secrets: []*corev1.Secret{secret}},
		"heal: would write the missing Secrets":  {old: stored, obj: inline},
		"fill: a Secret not ours":                {old: empty, obj: inline, secrets: []*corev1.Secret{notOurs}},
		"heal: a Secret not ours":                {old: stored, obj: inline, secrets: []*corev1.Secret{notOurs}},
		"the same objects: would get the refs":   {old: stored, obj: inline, secrets: []*corev1.Secret{secret}},
		"un-archive, the same objects (refused)": {old: archivedCOS(stored), obj: inline, secrets: []*corev1.Secret{secret}},
	}
	for name, tc := range tests {
		for _, dryRun := range []bool{false, true} {
			t.Run(name+dryRunName(dryRun), func(t *testing.T) {
				judged := func(sentRV string) (*countingStore, admissionResponse) {
					store := &countingStore{Store: admissiontest.NewStore(ns)}
					for _, s := range tc.secrets {
						store.AddSecret(s)
					}
					e := &Externalizer{Store: store, Metrics: NewMetrics(),
						Options: Options{SystemNamespace: ns, Mode: cosadmission.ModeOversized, Threshold: 100}}
					old, obj := tc.old.DeepCopy(), tc.obj.DeepCopy()
					old.ResourceVersion, obj.ResourceVersion = "42", sentRV
					req := request(t, admissionv1.Update, obj, "", old)
					req.DryRun = &dryRun
					resp := e.Handle(context.Background(), req)
					return store, admissionResponse{allowed: resp.Allowed, patches: len(resp.Patches), warnings: len(resp.Warnings)}
				}
				store, got := judged("41")
				if want := (admissionResponse{allowed: true}); got != want || store.calls != 0 {
					t.Errorf("stale: %+v and %d Store calls, want %+v and none", got, store.calls, want)
				}
				if store, fresh := judged("42"); fresh == got && store.calls == 0 {
					t.Errorf("the same update at the stored resourceVersion is answered the same (%+v, no Store call): the case tests nothing", fresh)
				}
			})
		}
	}
}

// admissionResponse is what TestHandleAdmitsStaleUpdates compares of a response.
type admissionResponse struct {
	allowed           bool
	patches, warnings int
}

func archivedCOS(c *olmv1.ClusterObjectSet) *olmv1.ClusterObjectSet {
	c = c.DeepCopy()
	c.Spec.LifecycleState = olmv1.LifecycleStateArchived
	return c
}

func dryRunName(dryRun bool) string {
	if dryRun {
		return ", dry run"
	}
	return ""
}
