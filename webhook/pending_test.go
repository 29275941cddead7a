package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	cosadmission "github.com/cos-externalizer/cos-externalizer/internal/admission"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/admissiontest"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/secretdata"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
)

func TestLedger(t *testing.T) {
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	item := func(n string, bytes int64) pendingItem { return pendingItem{key: key(n), bytes: bytes} }
	// step is one operation: reserve items (then settle with created, unless hold), or drop.
	type step struct {
		reserve []pendingItem
		created []string
		hold    bool // the write is still in flight
		drop    string
		wantOK  bool
	}
	type state struct {
		Entries       map[types.NamespacedName]int64
		Bytes         int64
		ReservedBytes int64
		ReservedCount int
	}
	tests := map[string]struct {
		steps []step
		want  state
	}{
		"a write within the bound enters what it created": {
			steps: []step{{reserve: []pendingItem{item("a", 40), item("b", 40)}, created: []string{"a", "b"}, wantOK: true}},
			want:  state{Entries: map[types.NamespacedName]int64{key("a"): 40, key("b"): 40}, Bytes: 80},
		},
		"a reused Secret does not count": {
			steps: []step{{reserve: []pendingItem{item("a", 40), item("b", 40)}, created: []string{"a"}, wantOK: true}},
			want:  state{Entries: map[types.NamespacedName]int64{key("a"): 40}, Bytes: 40},
		},
		"past the bytes: refused": {
			steps: []step{
				{reserve: []pendingItem{item("a", 60)}, created: []string{"a"}, wantOK: true},
				{reserve: []pendingItem{item("b", 41)}},
			},
			want: state{Entries: map[types.NamespacedName]int64{key("a"): 60}, Bytes: 60},
		},
		"exactly the bound passes": {
			steps: []step{
				{reserve: []pendingItem{item("a", 60)}, created: []string{"a"}, wantOK: true},
				{reserve: []pendingItem{item("b", 40)}, created: []string{"b"}, wantOK: true},
			},
			want: state{Entries: map[types.NamespacedName]int64{key("a"): 60, key("b"): 40}, Bytes: 100},
		},
		"past the count: refused": {
			steps: []step{
				{reserve: []pendingItem{item("a", 1), item("b", 1), item("c", 1)}, created: []string{"a", "b", "c"}, wantOK: true},
				{reserve: []pendingItem{item("d", 1)}},
			},
			want: state{Entries: map[types.NamespacedName]int64{key("a"): 1, key("b"): 1, key("c"): 1}, Bytes: 3},
		},
		"Secrets in the ledger need no room": {
			steps: []step{
				{reserve: []pendingItem{item("a", 90)}, created: []string{"a"}, wantOK: true},
				{reserve: []pendingItem{item("a", 90)}, wantOK: true},
			},
			want: state{Entries: map[types.NamespacedName]int64{key("a"): 90}, Bytes: 90},
		},
		"writes in flight hold room": {
			steps: []step{
				{reserve: []pendingItem{item("a", 60)}, hold: true, wantOK: true},
				{reserve: []pendingItem{item("b", 60)}},
			},
			want: state{Entries: map[types.NamespacedName]int64{}, ReservedBytes: 60, ReservedCount: 1},
		},
		"a planned Secret twice counts once": {
			steps: []step{{reserve: []pendingItem{item("a", 60), item("a", 60)}, created: []string{"a"}, wantOK: true}},
			want:  state{Entries: map[types.NamespacedName]int64{key("a"): 60}, Bytes: 60},
		},
		"a dropped Secret gives its room back": {
			steps: []step{
				{reserve: []pendingItem{item("a", 60)}, created: []string{"a"}, wantOK: true},
				{drop: "a"},
				{drop: "unknown"},
				{reserve: []pendingItem{item("b", 100)}, created: []string{"b"}, wantOK: true},
			},
			want: state{Entries: map[types.NamespacedName]int64{key("b"): 100}, Bytes: 100},
		},
		"larger than the bound alone: refused": {
			steps: []step{{reserve: []pendingItem{item("a", 101)}}},
			want:  state{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var l ledger
			for i, s := range tc.steps {
				if s.drop != "" {
					l.drop(key(s.drop))
					continue
				}
				r, ok := l.reserve(s.reserve, 100, 3)
				if ok != s.wantOK {
					t.Fatalf("step %d: reserve ok %v, want %v", i, ok, s.wantOK)
				}
				if !ok || s.hold {
					continue
				}
				var created []pendingItem
				for _, it := range s.reserve {
					for _, c := range s.created {
						if it.key == key(c) {
							created = append(created, it)
						}
					}
				}
				l.settle(r, created)
			}
			got := state{Entries: l.entries, Bytes: l.bytes, ReservedBytes: l.reservedBytes, ReservedCount: l.reservedCount}
			if got.Entries == nil {
				got.Entries = map[types.NamespacedName]int64{}
			}
			want := tc.want
			if want.Entries == nil {
				want.Entries = map[types.NamespacedName]int64{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnreferencedRefuses: past the bound, the pipeline refuses with 429 before it writes anything,
// naming the flag; a dry run and a write that only reuses Secrets pass; a Secret that leaves the
// ledger gives its room back.
func TestUnreferencedRefuses(t *testing.T) {
	const ns = "olmv1-system"
	ctx := context.Background()
	store := admissiontest.NewStore(ns)
	u := &Unreferenced{MaxBytes: 1 << 30, MaxSecrets: 2}
	p := &cosadmission.Pipeline{Store: u.Wrap(store, ns), SystemNamespace: ns, Mode: cosadmission.ModeAlways}
	create := func(name string, dryRun bool) cosadmission.Response {
		cos := b.COS(name, b.WithPhase("p", b.InlineConfigMaps("default", name, 1)...))
		return p.Admit(ctx, cosadmission.Request{Operation: cosadmission.Create, New: cos, SpecSize: 100, DryRun: dryRun})
	}
	for _, name := range []string{"one", "two"} {
		if r := create(name, false); r.Refusal != nil || r.Stats.Created != 1 {
			t.Fatalf("%s: %+v", name, r.Refusal)
		}
	}
	if n, _ := u.Pending(); n != 2 {
		t.Errorf("%d Secrets pending, want 2", n)
	}
	r := create("three", false)
	if r.Refusal == nil || r.Refusal.Code != http.StatusTooManyRequests || !errors.Is(r.Refusal.Err, cosadmission.ErrRetryLater) ||
		!strings.Contains(r.Refusal.Err.Error(), "--max-unreferenced-secrets=2") {
		t.Fatalf("past the bound: want 429 naming the flag, got %+v", r.Refusal)
	}
	if resp := refusal("three", r.Refusal); resp.Result.Code != http.StatusTooManyRequests || resp.Result.Details.RetryAfterSeconds == 0 {
		t.Errorf("the webhook's response: %+v", resp.Result)
	}
	if got := len(store.Secrets()); got != 2 {
		t.Errorf("%d Secrets written, want 2: the refused request wrote", got)
	}
	if r := create("three", true); r.Refusal != nil {
		t.Errorf("a dry run is not bounded: %v", r.Refusal.Err)
	}
	// A re-apply of "one" (its Secret is pending) creates nothing: it passes.
	if r := create("one", false); r.Refusal != nil {
		t.Errorf("a write that creates nothing new: %v", r.Refusal.Err)
	}
	// So does a write whose Secret exists and is not pending (written by another replica).
	four := b.COS("four", b.WithPhase("p", b.InlineConfigMaps("default", "four", 1)...))
	plan, err := content.PlanFor(four.Name, cosadmission.PlanInput(four), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store.AddSecret(secretdata.ObjectDataSecret(four.Name, ns, plan.Secrets[0]))
	if r := create("four", false); r.Refusal != nil || r.Stats.Created != 0 {
		t.Errorf("a write that reuses a Secret of another replica: %+v", r.Refusal)
	}
	for _, k := range store.Secrets() {
		if strings.HasPrefix(k.Name, "one") {
			u.drop(k)
		}
	}
	if r := create("three", false); r.Refusal != nil {
		t.Errorf("after a Secret left the ledger: %v", r.Refusal.Err)
	}
	if n, _ := u.Pending(); n != 2 {
		t.Errorf("%d Secrets pending, want 2 (two, three)", n)
	}
}
