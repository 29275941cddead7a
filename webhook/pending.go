package webhook

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	cosadmission "github.com/cos-externalizer/cos-externalizer/internal/admission"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/collision"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/secretuse"
)

// Defaults of the bound on unreferenced writes (--max-unreferenced-bytes, --max-unreferenced-secrets).
const (
	DefaultMaxUnreferencedBytes   = 256 << 20
	DefaultMaxUnreferencedSecrets = 1000
)

// RefusalUnreferenced is the refusal metric's reason of a request refused by Unreferenced.
const RefusalUnreferenced = "unreferenced_limit"

// maxAbsentChecks bounds the uncached reads one refused request spends on ledger entries the cache
// does not hold (Secrets deleted before the cache saw them).
const maxAbsentChecks = 8

// Unreferenced bounds the object-data Secrets that this replica's mutating webhook created and that no
// ClusterObjectSet references yet: a caller that is not the API server (or a create refused after
// admission) makes the webhook write Secrets that nothing will ever reference, which the orphan sweep
// removes only after its grace period. Past MaxBytes or MaxSecrets, a write is refused at once with
// 429 and nothing is written. Bytes count when this replica creates a Secret, not when it reuses one;
// a Secret leaves the ledger once the manager's cache shows it referenced by a live ClusterObjectSet,
// owned by an existing one, or gone. A dry run neither checks nor counts. The bound is per replica.
type Unreferenced struct {
	MaxBytes   int64
	MaxSecrets int

	mu     sync.Mutex
	ledger ledger
	// cache is the manager's (Watch): nil, entries leave only when a refused request prunes them.
	cache           client.Reader
	systemNamespace string
}

// Wrap returns inner, which writes Secrets into namespace, bounded by u; a nil u returns inner.
func (u *Unreferenced) Wrap(inner cosadmission.Store, namespace string) cosadmission.Store {
	if u == nil || inner == nil {
		return inner
	}
	return &unreferencedStore{Store: inner, u: u, namespace: namespace}
}

// Watch follows the manager's cache: a ClusterObjectSet that references a Secret, an owner that
// exists and a Secret deleted take it out of the ledger. It must be called before the cache starts.
func (u *Unreferenced) Watch(ctx context.Context, informers cache.Informers, reader client.Reader, systemNamespace string) error {
	u.cache, u.systemNamespace = reader, systemNamespace
	cosInformer, err := informers.GetInformer(ctx, &olmv1.ClusterObjectSet{})
	if err != nil {
		return fmt.Errorf("watching ClusterObjectSets for the unreferenced Secrets' ledger: %w", err)
	}
	if _, err := cosInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { u.referencedBy(obj) },
		UpdateFunc: func(_, obj any) { u.referencedBy(obj) },
	}); err != nil {
		return err
	}
	secretInformer, err := informers.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("watching Secrets for the unreferenced Secrets' ledger: %w", err)
	}
	_, err = secretInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { u.secretChanged(ctx, obj) },
		UpdateFunc: func(_, obj any) { u.secretChanged(ctx, obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if sec, ok := obj.(*corev1.Secret); ok {
				u.drop(client.ObjectKeyFromObject(sec))
			}
		},
	})
	return err
}

// Pending returns the Secrets in the ledger and their bytes.
func (u *Unreferenced) Pending() (int, int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.ledger.entries), u.ledger.bytes
}

func (u *Unreferenced) drop(key types.NamespacedName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ledger.drop(key)
}

// referencedBy drops the Secrets a live ClusterObjectSet references.
func (u *Unreferenced) referencedBy(obj any) {
	cos, ok := obj.(*olmv1.ClusterObjectSet)
	if !ok || !secretuse.Live(cos) {
		return
	}
	keys := cos.ReferencedSecrets(u.systemNamespace)
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, key := range keys {
		u.ledger.drop(key)
	}
}

// secretChanged drops a Secret of the ledger that an existing ClusterObjectSet owns.
func (u *Unreferenced) secretChanged(ctx context.Context, obj any) {
	sec, ok := obj.(*corev1.Secret)
	if !ok || !u.holds(client.ObjectKeyFromObject(sec)) {
		return
	}
	if u.ownedByExisting(ctx, sec.OwnerReferences) {
		u.drop(client.ObjectKeyFromObject(sec))
	}
}

func (u *Unreferenced) holds(key types.NamespacedName) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.ledger.entries[key]
	return ok
}

// ownedByExisting reports whether the cache holds a ClusterObjectSet that refs name, with its uid.
func (u *Unreferenced) ownedByExisting(ctx context.Context, refs []metav1.OwnerReference) bool {
	for _, ref := range refs {
		if !collision.IsClusterObjectSetRef(ref) {
			continue
		}
		owner := &olmv1.ClusterObjectSet{}
		if err := u.cache.Get(ctx, client.ObjectKey{Name: ref.Name}, owner); err == nil && owner.UID == ref.UID {
			return true
		}
	}
	return false
}

// settled reports whether the cache already shows the Secret key referenced by a live
// ClusterObjectSet or owned by an existing one; absent reports that the cache does not hold it.
func (u *Unreferenced) settled(ctx context.Context, key types.NamespacedName) (settled, absent bool) {
	if u.cache == nil {
		return false, false
	}
	referrers, err := objectdata.Referrers(ctx, u.cache, key)
	if err == nil && len(secretuse.Users(referrers, key, u.systemNamespace)) > 0 {
		return true, false
	}
	sec := &corev1.Secret{}
	if err := u.cache.Get(ctx, key, sec); err != nil {
		return false, apierrors.IsNotFound(err)
	}
	return u.ownedByExisting(ctx, sec.OwnerReferences), false
}

// reserve takes room for the Secrets of items that may be created, or refuses with an
// *UnreferencedLimitError. Past the bound it first prunes the ledger against the cache, leaves out
// the planned Secrets that exist already (read with store, uncached: a reuse creates nothing), and
// tries once more.
func (u *Unreferenced) reserve(ctx context.Context, store cosadmission.Store, items []pendingItem) (*reservation, error) {
	u.mu.Lock()
	r, ok := u.ledger.reserve(items, u.MaxBytes, u.MaxSecrets)
	u.mu.Unlock()
	if ok {
		return r, nil
	}
	u.prune(ctx, store)
	var missing []pendingItem
	for _, it := range items {
		if _, err := store.GetSecret(ctx, it.key); err != nil {
			missing = append(missing, it)
		}
	}
	u.mu.Lock()
	r, ok = u.ledger.reserve(missing, u.MaxBytes, u.MaxSecrets)
	count, bytes := len(u.ledger.entries)+u.ledger.reservedCount, u.ledger.bytes+u.ledger.reservedBytes
	u.mu.Unlock()
	if ok {
		return r, nil
	}
	need := reservationOf(missing)
	ctrl.LoggerFrom(ctx).Info("refused: the bound on unreferenced object-data Secrets leaves no room",
		"pendingSecrets", count, "pendingBytes", bytes, "planSecrets", need.count, "planBytes", need.bytes,
		"maxUnreferencedSecrets", u.MaxSecrets, "maxUnreferencedBytes", u.MaxBytes)
	return nil, &UnreferencedLimitError{
		Secrets: need.count, Bytes: need.bytes, MaxSecrets: u.MaxSecrets, MaxBytes: u.MaxBytes,
		OverSecrets: count+need.count > u.MaxSecrets, OverBytes: bytes+need.bytes > u.MaxBytes,
	}
}

// prune drops the entries the cache shows settled, and those it does not hold that an uncached read
// finds gone (at most maxAbsentChecks).
func (u *Unreferenced) prune(ctx context.Context, store cosadmission.Store) {
	u.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(u.ledger.entries))
	for key := range u.ledger.entries {
		keys = append(keys, key)
	}
	u.mu.Unlock()
	checks := 0
	for _, key := range keys {
		settled, absent := u.settled(ctx, key)
		if absent && checks < maxAbsentChecks {
			checks++
			_, err := store.GetSecret(ctx, key)
			settled = apierrors.IsNotFound(err)
		}
		if settled {
			u.drop(key)
		}
	}
}

// settle ends r: the Secrets created enter the ledger, unless the cache already shows them settled.
func (u *Unreferenced) settle(ctx context.Context, r *reservation, created []pendingItem) {
	var keep []pendingItem
	for _, it := range created {
		if settled, _ := u.settled(ctx, it.key); !settled {
			keep = append(keep, it)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ledger.settle(r, keep)
}

// UnreferencedLimitError refuses a write that would pass the bound: nothing was written. It names
// the request's own Secrets' count and bytes and the limits, nothing of other Secrets.
type UnreferencedLimitError struct {
	Secrets    int
	Bytes      int64
	MaxSecrets int
	MaxBytes   int64
	// OverSecrets and OverBytes say which limit the write would pass.
	OverSecrets, OverBytes bool
}

func (e *UnreferencedLimitError) Error() string {
	var flags string
	switch {
	case e.OverSecrets && e.OverBytes:
		flags = fmt.Sprintf("--max-unreferenced-secrets=%d and --max-unreferenced-bytes=%d", e.MaxSecrets, e.MaxBytes)
	case e.OverSecrets:
		flags = fmt.Sprintf("--max-unreferenced-secrets=%d", e.MaxSecrets)
	default:
		flags = fmt.Sprintf("--max-unreferenced-bytes=%d", e.MaxBytes)
	}
	return fmt.Sprintf("the webhook holds as many object-data Secrets written and not yet referenced by any ClusterObjectSet as it may (%s): "+
		"no room for the %d Secrets (%d bytes) of this ClusterObjectSet; nothing was written; retry once the ClusterObjectSets being created are stored, or the orphan sweep has removed Secrets that none references",
		flags, e.Secrets, e.Bytes)
}

// Unwrap makes the pipeline refuse with 429 (cosadmission.ErrRetryLater).
func (e *UnreferencedLimitError) Unwrap() error { return cosadmission.ErrRetryLater }

// unreferencedStore is a Store whose Write is bounded by u.
type unreferencedStore struct {
	cosadmission.Store
	u         *Unreferenced
	namespace string
}

func (s *unreferencedStore) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	if dryRun {
		return s.Store.Write(ctx, cosName, plan, dryRun)
	}
	items := make([]pendingItem, len(plan.Secrets))
	for i, sec := range plan.Secrets {
		items[i] = pendingItem{key: types.NamespacedName{Namespace: s.namespace, Name: sec.Name}, bytes: secretBytes(sec)}
	}
	r, err := s.u.reserve(ctx, s.Store, items)
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	created := make([]bool, len(items))
	inner := s.Store
	exact := false
	if w, ok := inner.(*objectdata.Writer); ok {
		// Which Secrets were created, not reused: the Writer tells.
		c := *w
		prev := c.Written
		c.Written = func(i int, wasCreated bool) {
			mu.Lock()
			created[i] = wasCreated
			mu.Unlock()
			if prev != nil {
				prev(i, wasCreated)
			}
		}
		inner, exact = &c, true
	}
	n, err := inner.Write(ctx, cosName, plan, dryRun)
	var added []pendingItem
	for i, it := range items {
		// Another Store says only how many: each planned Secret that may be new counts.
		if created[i] || !exact && n > 0 && r.has(it.key) {
			added = append(added, it)
		}
	}
	s.u.settle(context.WithoutCancel(ctx), r, added)
	return n, err
}

// secretBytes is what a planned Secret stores: its keys and values.
func secretBytes(s content.SecretOut) int64 {
	var n int64
	for k, v := range s.Data {
		n += int64(len(k) + len(v))
	}
	return n
}

// pendingItem is one planned Secret and its bytes.
type pendingItem struct {
	key   types.NamespacedName
	bytes int64
}

// ledger is the accounting of Unreferenced, with no client: the Secrets created and not yet
// referenced (entries), and the room held by writes in flight (reservations). It is not safe for
// concurrent use; its zero value is ready.
type ledger struct {
	entries       map[types.NamespacedName]int64
	bytes         int64
	reservedBytes int64
	reservedCount int
}

// reservation is the room one write in flight holds: the Secrets it may create.
type reservation struct {
	items []pendingItem
	count int
	bytes int64
}

func (r *reservation) has(key types.NamespacedName) bool {
	for _, it := range r.items {
		if it.key == key {
			return true
		}
	}
	return false
}

// reservationOf is the room items need: each Secret once.
func reservationOf(items []pendingItem) *reservation {
	r := &reservation{}
	seen := map[types.NamespacedName]bool{}
	for _, it := range items {
		if seen[it.key] {
			continue
		}
		seen[it.key] = true
		r.items = append(r.items, it)
		r.count++
		r.bytes += it.bytes
	}
	return r
}

// reserve holds room for the items not in the ledger, unless the ledger, the writes in flight and
// they together would pass maxBytes or maxCount.
func (l *ledger) reserve(items []pendingItem, maxBytes int64, maxCount int) (*reservation, bool) {
	var fresh []pendingItem
	for _, it := range items {
		if _, ok := l.entries[it.key]; !ok {
			fresh = append(fresh, it)
		}
	}
	r := reservationOf(fresh)
	if l.bytes+l.reservedBytes+r.bytes > maxBytes || len(l.entries)+l.reservedCount+r.count > maxCount {
		return nil, false
	}
	l.reservedBytes += r.bytes
	l.reservedCount += r.count
	return r, true
}

// settle gives r's room back and enters the Secrets created.
func (l *ledger) settle(r *reservation, created []pendingItem) {
	l.reservedBytes -= r.bytes
	l.reservedCount -= r.count
	for _, it := range created {
		if _, ok := l.entries[it.key]; ok {
			continue
		}
		if l.entries == nil {
			l.entries = map[types.NamespacedName]int64{}
		}
		l.entries[it.key] = it.bytes
		l.bytes += it.bytes
	}
}

// drop takes the Secret key out of the ledger.
func (l *ledger) drop(key types.NamespacedName) {
	if n, ok := l.entries[key]; ok {
		delete(l.entries, key)
		l.bytes -= n
	}
}
