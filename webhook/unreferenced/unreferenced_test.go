package unreferenced

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
)

func TestLedger(t *testing.T) {
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	item := func(n string, bytes int64) pendingItem { return pendingItem{key: key(n), bytes: bytes} }
	// step is one operation: reserve items against the cluster's count (then settle with created,
	// unless hold), or seen (the cache shows the Secret).
	type step struct {
		reserve []pendingItem
		cluster usage
		created []string
		hold    bool // the write is still in flight
		seen    string
		wantOK  bool
	}
	type state struct {
		Unseen        map[types.NamespacedName]int64
		UnseenBytes   int64
		ReservedBytes int64
		ReservedCount int
	}
	// "shown" exists in the cache (a reuse).
	exists := func(k types.NamespacedName) bool { return k == key("shown") }
	tests := map[string]struct {
		steps []step
		want  state
	}{
		"a write within the bound counts what it created": {
			steps: []step{{reserve: []pendingItem{item("a", 40), item("b", 40)}, created: []string{"a", "b"}, wantOK: true}},
			want:  state{Unseen: map[types.NamespacedName]int64{key("a"): 40, key("b"): 40}, UnseenBytes: 80},
		},
		"a reused Secret does not count": {
			steps: []step{{reserve: []pendingItem{item("a", 40), item("b", 40)}, created: []string{"a"}, wantOK: true}},
			want:  state{Unseen: map[types.NamespacedName]int64{key("a"): 40}, UnseenBytes: 40},
		},
		"a Secret the cache shows needs no room, and is counted there": {
			steps: []step{{reserve: []pendingItem{item("shown", 100)}, cluster: usage{count: 3, bytes: 100}, created: []string{"shown"}, wantOK: true}},
			want:  state{Unseen: map[types.NamespacedName]int64{}},
		},
		"the cluster's count and this replica's together: past the bytes, refused": {
			steps: []step{
				{reserve: []pendingItem{item("a", 30)}, cluster: usage{count: 1, bytes: 30}, created: []string{"a"}, wantOK: true},
				{reserve: []pendingItem{item("b", 41)}, cluster: usage{count: 1, bytes: 30}},
			},
			want: state{Unseen: map[types.NamespacedName]int64{key("a"): 30}, UnseenBytes: 30},
		},
		"exactly the bound passes": {
			steps: []step{
				{reserve: []pendingItem{item("a", 60)}, created: []string{"a"}, wantOK: true},
				{reserve: []pendingItem{item("b", 40)}, created: []string{"b"}, wantOK: true},
			},
			want: state{Unseen: map[types.NamespacedName]int64{key("a"): 60, key("b"): 40}, UnseenBytes: 100},
		},
		"past the count: refused": {
			steps: []step{
				{reserve: []pendingItem{item("a", 1)}, cluster: usage{count: 2, bytes: 2}, created: []string{"a"}, wantOK: true},
				{reserve: []pendingItem{item("d", 1)}, cluster: usage{count: 2, bytes: 2}},
			},
			want: state{Unseen: map[types.NamespacedName]int64{key("a"): 1}, UnseenBytes: 1},
		},
		"the cluster alone full: refused": {
			steps: []step{{reserve: []pendingItem{item("a", 1)}, cluster: usage{count: 3}}},
			want:  state{Unseen: map[types.NamespacedName]int64{}},
		},
		"unseen Secrets need no room": {
			steps: []step{
				{reserve: []pendingItem{item("a", 90)}, created: []string{"a"}, wantOK: true},
				{reserve: []pendingItem{item("a", 90)}, wantOK: true},
			},
			want: state{Unseen: map[types.NamespacedName]int64{key("a"): 90}, UnseenBytes: 90},
		},
		"writes in flight hold room": {
			steps: []step{
				{reserve: []pendingItem{item("a", 60)}, hold: true, wantOK: true},
				{reserve: []pendingItem{item("b", 60)}},
			},
			want: state{Unseen: map[types.NamespacedName]int64{}, ReservedBytes: 60, ReservedCount: 1},
		},
		"a planned Secret twice counts once": {
			steps: []step{{reserve: []pendingItem{item("a", 60), item("a", 60)}, created: []string{"a"}, wantOK: true}},
			want:  state{Unseen: map[types.NamespacedName]int64{key("a"): 60}, UnseenBytes: 60},
		},
		"a Secret the cache shows is no longer this replica's to count": {
			steps: []step{
				{reserve: []pendingItem{item("a", 60)}, created: []string{"a"}, wantOK: true},
				{seen: "a"},
				{seen: "unknown"},
				{reserve: []pendingItem{item("b", 100)}, created: []string{"b"}, wantOK: true},
			},
			want: state{Unseen: map[types.NamespacedName]int64{key("b"): 100}, UnseenBytes: 100},
		},
		"larger than the bound alone: refused": {
			steps: []step{{reserve: []pendingItem{item("a", 101)}}},
			want:  state{Unseen: map[types.NamespacedName]int64{}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var l ledger
			for i, s := range tc.steps {
				if s.seen != "" {
					l.seen(key(s.seen))
					continue
				}
				r, ok := l.reserve(s.reserve, exists, s.cluster, 100, 3)
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
				l.settle(r, created, exists)
			}
			got := state{Unseen: l.unseen, UnseenBytes: l.unseenBytes, ReservedBytes: l.reservedBytes, ReservedCount: l.reservedCount}
			if got.Unseen == nil {
				got.Unseen = map[types.NamespacedName]int64{}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnreferencedRefuses: the bound counts the unreferenced Secrets the cache shows, whoever wrote
// them (another replica, this one before a restart), and those this replica created that the cache
// does not show yet. Past the bound, the pipeline refuses with 429 before it writes anything, naming
// the flag; a dry run and a write that only reuses Secrets pass; a Secret the cache shows referenced,
// owned or gone gives its room back.
func TestUnreferencedRefuses(t *testing.T) {
	const ns = "olmv1-system"
	ctx := context.Background()
	store := admissiontest.NewStore(ns)
	u := &Bound{MaxBytes: 1 << 30, MaxSecrets: 2}
	secrets := prometheus.NewGauge(prometheus.GaugeOpts{Name: "unreferenced_secrets"})
	u.follow(ns, Gauges{Secrets: secrets, Bytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "unreferenced_bytes"})})
	p := &cosadmission.Pipeline{Store: u.Wrap(store, ns), SystemNamespace: ns, Mode: cosadmission.ModeAlways}
	create := func(name string, dryRun bool) cosadmission.Response {
		cos := b.COS(name, b.WithPhase("p", b.InlineConfigMaps("default", name, 1)...))
		return p.Admit(ctx, cosadmission.Request{Operation: cosadmission.Create, New: cos, SpecSize: 100, DryRun: dryRun})
	}
	// cached is the Secret key as the cache shows it (no data), its size recorded by the transform.
	cached := func(key types.NamespacedName, owners ...metav1.OwnerReference) *corev1.Secret {
		sec, err := store.GetSecret(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		sec.UID = types.UID("uid-" + key.Name)
		sec.OwnerReferences = owners
		u.RecordSize(sec)
		sec.Data = nil
		return sec
	}
	pending := func(want int) {
		t.Helper()
		if n, _ := u.Pending(); n != want {
			t.Errorf("%d Secrets pending, want %d", n, want)
		}
		if got := gauge(secrets); got != float64(want) {
			t.Errorf("gauge of unreferenced Secrets %v, want %d", got, want)
		}
	}
	// An unreferenced Secret written by another replica, or before a restart: the cache shows it.
	other := secretdata.ObjectDataSecret("other", ns, content.SecretOut{Name: "other-0123456789abcdef", Data: map[string][]byte{"k": []byte("{}")}})
	store.AddSecret(other)
	otherKey := types.NamespacedName{Namespace: ns, Name: other.Name}
	u.secretChanged(cached(otherKey), false)
	pending(1)
	if _, bytes := u.Pending(); bytes != dataBytes(other.Data) {
		t.Errorf("%d bytes pending, want the other Secret's %d", bytes, dataBytes(other.Data))
	}
	if r := create("one", false); r.Refusal != nil || r.Stats.Created != 1 {
		t.Fatalf("one: %+v", r.Refusal)
	}
	pending(2)
	r := create("two", false)
	if r.Refusal == nil || r.Refusal.Code != http.StatusTooManyRequests || !errors.Is(r.Refusal.Err, cosadmission.ErrRetryLater) ||
		!strings.Contains(r.Refusal.Err.Error(), "--max-unreferenced-secrets=2") {
		t.Fatalf("past the bound: want 429 naming the flag, got %+v", r.Refusal)
	}
	if got := len(store.Secrets()); got != 2 {
		t.Errorf("%d Secrets stored, want 2: the refused request wrote", got)
	}
	if r := create("two", true); r.Refusal != nil {
		t.Errorf("a dry run is not bounded: %v", r.Refusal.Err)
	}
	// A re-apply of "one" creates nothing: it passes.
	if r := create("one", false); r.Refusal != nil {
		t.Errorf("a write that creates nothing new: %v", r.Refusal.Err)
	}
	var oneKey types.NamespacedName
	for _, k := range store.Secrets() {
		if strings.HasPrefix(k.Name, "one") {
			oneKey = k
		}
	}
	// The cache shows one's Secret: counted there, no longer as this replica's own.
	u.secretChanged(cached(oneKey), false)
	pending(2)
	// A ClusterObjectSet that references the other Secret gives its room back.
	user := b.COS("user", b.WithPhase("p", b.Ref(other.Name, "", "k")))
	user.UID = "uid-user"
	u.setChanged(user, false)
	pending(1)
	if r := create("two", false); r.Refusal != nil {
		t.Errorf("after a Secret was referenced: %v", r.Refusal.Err)
	}
	pending(2)
	// Owned by an existing ClusterObjectSet: out; deleted: out.
	u.secretChanged(cached(oneKey, metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: "user", UID: "uid-user"}), false)
	pending(1)
	for _, k := range store.Secrets() {
		if strings.HasPrefix(k.Name, "two") {
			u.secretChanged(cached(k), true)
		}
	}
	pending(0)
	// The ClusterObjectSet gone and its ref with it: the other Secret and one's are unreferenced again.
	u.setChanged(toolscache.DeletedFinalStateUnknown{Key: "user", Obj: user}, false)
	pending(2)
}

// TestUnreferencedWaitsForTheCache: until the cache has been read, the count is not known: a write
// is refused with 429, nothing written.
func TestUnreferencedWaitsForTheCache(t *testing.T) {
	const ns = "olmv1-system"
	store := admissiontest.NewStore(ns)
	u := &Bound{MaxBytes: 1 << 30, MaxSecrets: 100, SyncWait: time.Millisecond}
	u.follow(ns, Gauges{})
	u.synced = func() bool { return false }
	p := &cosadmission.Pipeline{Store: u.Wrap(store, ns), SystemNamespace: ns, Mode: cosadmission.ModeAlways}
	cos := b.COS("early", b.WithPhase("p", b.InlineConfigMaps("default", "early", 1)...))
	r := p.Admit(context.Background(), cosadmission.Request{Operation: cosadmission.Create, New: cos, SpecSize: 100})
	if r.Refusal == nil || r.Refusal.Code != http.StatusTooManyRequests || !strings.Contains(r.Refusal.Err.Error(), "cache is being read") {
		t.Fatalf("before the cache is read: want 429, got %+v", r.Refusal)
	}
	if n := len(store.Secrets()); n != 0 {
		t.Errorf("%d Secrets written", n)
	}
}

func gauge(g prometheus.Gauge) float64 {
	m := &dto.Metric{}
	if err := g.Write(m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}
