// Package unreferenced bounds the object-data Secrets that the mutating webhook writes and that no
// ClusterObjectSet references yet (--max-unreferenced-bytes, --max-unreferenced-secrets): a ledger of
// this replica's writes in flight over the count its cache shows (Bound), and the Store of the
// admission pipeline that refuses a write past the bound (Bound.Wrap).
package unreferenced

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// Gauges show what the bound counts (Bound.Pending); nil ones show nothing.
type Gauges struct {
	Secrets, Bytes prometheus.Gauge
}

// Defaults of the bound on unreferenced writes (--max-unreferenced-bytes, --max-unreferenced-secrets).
const (
	DefaultMaxBytes   = 256 << 20
	DefaultMaxSecrets = 1000
)

// maxAbsentChecks bounds the uncached reads one refused request spends on Secrets this replica
// created that its cache has not shown (deleted before the cache saw them).
const maxAbsentChecks = 8

// defaultSyncWait is how long a write waits for the manager's cache to be read before it is refused
// (Bound.SyncWait).
const defaultSyncWait = 5 * time.Second

// Bound bounds the object-data Secrets of the system namespace that no ClusterObjectSet uses and
// none owns (secretuse.UnusedSecrets, the orphan sweep's candidates), whoever wrote them: a
// caller that is not the API server (or a create refused after admission) makes the webhook write
// Secrets that nothing will ever reference, which the orphan sweep removes only after its grace
// period. Past MaxBytes or MaxSecrets, a write that would create Secrets is refused at once with 429
// and nothing is written; one that only reuses existing Secrets passes. A dry run neither checks nor
// counts.
//
// The count is derived from the cluster, not from what this process wrote: the manager's cache,
// followed event by event (Watch, secretuse.UnusedIndex), so every replica counts the same Secrets
// and a restarted replica counts again those that exist before it admits a write; a Secret leaves
// the count when the cache shows it referenced by a live ClusterObjectSet, owned by an existing one,
// or gone. The cache holds Secrets without their data: their sizes are measured before it drops it
// (RecordSize, the cache's transform). To that this replica adds what only it knows: the room its
// writes in flight hold, and the Secrets they created that its cache does not show yet.
type Bound struct {
	MaxBytes   int64
	MaxSecrets int
	// SyncWait bounds how long a write waits for the manager's cache to be read at start before it is
	// refused (429); 0: 5 seconds.
	SyncWait time.Duration

	// sizes are the data sizes of the cached Secrets, by UID, measured before the cache drops the
	// data (RecordSize).
	sizesMu sync.Mutex
	sizes   map[types.UID]int64

	mu sync.Mutex
	// index is the cluster's unused Secrets as the cache shows them; nil until Watch.
	index  *secretuse.UnusedIndex
	ledger ledger
	// synced reports whether the index holds everything the cache listed at start; nil: not watching.
	synced func() bool
	gauges Gauges
}

// Wrap returns inner, which writes Secrets into namespace, bounded by u; a nil u returns inner.
func (u *Bound) Wrap(inner cosadmission.Store, namespace string) cosadmission.Store {
	if u == nil || inner == nil {
		return inner
	}
	return &unreferencedStore{Store: inner, u: u, namespace: namespace}
}

// RecordSize measures the data of sec (secretBytes), before the manager's cache drops it: the cache's
// transform calls it for every Secret it stores. A nil u records nothing.
func (u *Bound) RecordSize(sec *corev1.Secret) {
	if u == nil || sec.UID == "" {
		return
	}
	n := dataBytes(sec.Data)
	u.sizesMu.Lock()
	defer u.sizesMu.Unlock()
	if u.sizes == nil {
		u.sizes = map[types.UID]int64{}
	}
	u.sizes[sec.UID] = n
}

// sizeOf returns the recorded data size of the Secret uid; forget: and forgets it (deleted).
func (u *Bound) sizeOf(uid types.UID, forget bool) int64 {
	u.sizesMu.Lock()
	defer u.sizesMu.Unlock()
	n := u.sizes[uid]
	if forget {
		delete(u.sizes, uid)
	}
	return n
}

// Watch follows the manager's cache (informers, for the Secrets of systemNamespace and every
// ClusterObjectSet): every change of either updates the count. gauges of unreferenced
// Secrets follow it (nil: none). It must be called before the cache starts; writes wait until the
// cache has been read (SyncWait).
func (u *Bound) Watch(ctx context.Context, informers cache.Informers, systemNamespace string, gauges Gauges) error {
	u.follow(systemNamespace, gauges)
	cosInformer, err := informers.GetInformer(ctx, &olmv1.ClusterObjectSet{})
	if err != nil {
		return fmt.Errorf("watching ClusterObjectSets for the count of unreferenced Secrets: %w", err)
	}
	sets, err := cosInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { u.setChanged(obj, false) },
		UpdateFunc: func(_, obj any) { u.setChanged(obj, false) },
		DeleteFunc: func(obj any) { u.setChanged(obj, true) },
	})
	if err != nil {
		return err
	}
	secretInformer, err := informers.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("watching Secrets for the count of unreferenced Secrets: %w", err)
	}
	secrets, err := secretInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { u.secretChanged(obj, false) },
		UpdateFunc: func(_, obj any) { u.secretChanged(obj, false) },
		DeleteFunc: func(obj any) { u.secretChanged(obj, true) },
	})
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.synced = func() bool { return sets.HasSynced() && secrets.HasSynced() }
	u.mu.Unlock()
	return nil
}

// follow starts counting the unused Secrets of systemNamespace from the changes told (setChanged,
// secretChanged), empty.
func (u *Bound) follow(systemNamespace string, gauges Gauges) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.index, u.gauges = secretuse.NewUnusedIndex(systemNamespace), gauges
	u.export()
}

// setChanged tells the index a ClusterObjectSet as the cache has it now, or gone.
func (u *Bound) setChanged(obj any, deleted bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = tomb.Obj, true
	}
	cos, ok := obj.(*olmv1.ClusterObjectSet)
	if !ok {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if deleted {
		u.index.DeleteClusterObjectSet(cos.Name)
	} else {
		u.index.SetClusterObjectSet(cos)
	}
	u.export()
}

// secretChanged tells the index a Secret as the cache has it now, or gone: the cache shows it, so it
// is no longer this replica's alone to count.
func (u *Bound) secretChanged(obj any, deleted bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = tomb.Obj, true
	}
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(sec)
	size := u.sizeOf(sec.UID, deleted)
	u.mu.Lock()
	defer u.mu.Unlock()
	if deleted {
		u.index.DeleteSecret(key)
	} else {
		u.index.SetSecret(sec, size)
	}
	u.ledger.seen(key)
	u.export()
}

// export sets the gauges to what the bound counts; u.mu is held.
func (u *Bound) export() {
	count, bytes := u.pending()
	if u.gauges.Secrets != nil {
		u.gauges.Secrets.Set(float64(count))
	}
	if u.gauges.Bytes != nil {
		u.gauges.Bytes.Set(float64(bytes))
	}
}

// Pending returns what the bound counts: the unreferenced Secrets the cache shows, those this
// replica created that it does not show yet, and the room its writes in flight hold, in Secrets and
// bytes.
func (u *Bound) Pending() (int, int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pending()
}

// pending is Pending with u.mu held.
func (u *Bound) pending() (int, int64) {
	c := u.cluster()
	return c.count + len(u.ledger.unseen) + u.ledger.reservedCount, c.bytes + u.ledger.unseenBytes + u.ledger.reservedBytes
}

// cluster is what the index counts; u.mu is held.
func (u *Bound) cluster() usage {
	if u.index == nil {
		return usage{}
	}
	n, b := u.index.Unused()
	return usage{count: n, bytes: b}
}

// exists reports whether the cache shows the Secret key (of any type, used or not); u.mu is held.
func (u *Bound) exists(key types.NamespacedName) bool {
	return u.index != nil && u.index.Exists(key)
}

// waitSynced waits until the index holds what the cache listed at start, for at most SyncWait.
func (u *Bound) waitSynced(ctx context.Context) error {
	u.mu.Lock()
	synced := u.synced
	u.mu.Unlock()
	if synced == nil || synced() {
		return nil
	}
	timeout := u.SyncWait
	if timeout <= 0 {
		timeout = defaultSyncWait
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return synced(), nil
	}); err != nil {
		return &unreferencedNotReadError{}
	}
	return nil
}

// unreferencedNotReadError refuses a write while the manager's cache has not been read: the count of
// unreferenced Secrets is not known yet.
type unreferencedNotReadError struct{}

func (*unreferencedNotReadError) Error() string {
	return "the webhook has not yet counted the object-data Secrets that no ClusterObjectSet references (its cache is being read): nothing was written; retry"
}

// Unwrap makes the pipeline refuse with 429 (cosadmission.ErrRetryLater).
func (*unreferencedNotReadError) Unwrap() error { return cosadmission.ErrRetryLater }

// reserve takes room for the Secrets of items that may be created, or refuses with an
// *LimitError. Past the bound it first drops the Secrets this replica created that its
// cache does not show and that are gone, leaves out the planned Secrets that exist already (read with
// store, uncached: a reuse creates nothing), and tries once more.
func (u *Bound) reserve(ctx context.Context, store cosadmission.Store, items []pendingItem) (*reservation, error) {
	if err := u.waitSynced(ctx); err != nil {
		return nil, err
	}
	u.mu.Lock()
	r, ok := u.ledger.reserve(items, u.exists, u.cluster(), u.MaxBytes, u.MaxSecrets)
	if ok {
		u.export()
	}
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
	r, ok = u.ledger.reserve(missing, u.exists, u.cluster(), u.MaxBytes, u.MaxSecrets)
	count, bytes := u.pending()
	if ok {
		u.export()
	}
	u.mu.Unlock()
	if ok {
		return r, nil
	}
	need := reservationOf(missing)
	ctrl.LoggerFrom(ctx).Info("refused: the bound on unreferenced object-data Secrets leaves no room",
		"pendingSecrets", count, "pendingBytes", bytes, "planSecrets", need.count, "planBytes", need.bytes,
		"maxUnreferencedSecrets", u.MaxSecrets, "maxUnreferencedBytes", u.MaxBytes)
	return nil, &LimitError{
		Secrets: need.count, Bytes: need.bytes, MaxSecrets: u.MaxSecrets, MaxBytes: u.MaxBytes,
		OverSecrets: count+need.count > u.MaxSecrets, OverBytes: bytes+need.bytes > u.MaxBytes,
	}
}

// prune drops the Secrets this replica created that its cache does not show, when an uncached read
// finds them gone (at most maxAbsentChecks).
func (u *Bound) prune(ctx context.Context, store cosadmission.Store) {
	u.mu.Lock()
	keys := make([]types.NamespacedName, 0, min(len(u.ledger.unseen), maxAbsentChecks))
	for key := range u.ledger.unseen {
		if len(keys) == maxAbsentChecks {
			break
		}
		keys = append(keys, key)
	}
	u.mu.Unlock()
	for _, key := range keys {
		if _, err := store.GetSecret(ctx, key); apierrors.IsNotFound(err) {
			u.mu.Lock()
			u.ledger.seen(key)
			u.mu.Unlock()
		}
	}
}

// settle ends r: the Secrets created count as this replica's until its cache shows them.
func (u *Bound) settle(r *reservation, created []pendingItem) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ledger.settle(r, created, u.exists)
	u.export()
}

// LimitError refuses a write that would pass the bound: nothing was written. It names
// the request's own Secrets' count and bytes and the limits, nothing of other Secrets.
type LimitError struct {
	Secrets    int
	Bytes      int64
	MaxSecrets int
	MaxBytes   int64
	// OverSecrets and OverBytes say which limit the write would pass.
	OverSecrets, OverBytes bool
}

func (e *LimitError) Error() string {
	var flags string
	switch {
	case e.OverSecrets && e.OverBytes:
		flags = fmt.Sprintf("--max-unreferenced-secrets=%d and --max-unreferenced-bytes=%d", e.MaxSecrets, e.MaxBytes)
	case e.OverSecrets:
		flags = fmt.Sprintf("--max-unreferenced-secrets=%d", e.MaxSecrets)
	default:
		flags = fmt.Sprintf("--max-unreferenced-bytes=%d", e.MaxBytes)
	}
	return fmt.Sprintf("the cluster holds as many object-data Secrets that no ClusterObjectSet references as the webhook allows (%s): "+
		"no room for the %d Secrets (%d bytes) of this ClusterObjectSet; nothing was written; retry once the ClusterObjectSets being created are stored, or the orphan sweep has removed Secrets that none references",
		flags, e.Secrets, e.Bytes)
}

// Unwrap makes the pipeline refuse with 429 (cosadmission.ErrRetryLater).
func (e *LimitError) Unwrap() error { return cosadmission.ErrRetryLater }

// unreferencedStore is a Store whose Write is bounded by u.
type unreferencedStore struct {
	cosadmission.Store
	u         *Bound
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
	s.u.settle(r, added)
	return n, err
}

// secretBytes is what a planned Secret stores (dataBytes).
func secretBytes(s content.SecretOut) int64 {
	return dataBytes(s.Data)
}

// dataBytes is what a Secret's data stores: its keys and values.
func dataBytes(data map[string][]byte) int64 {
	var n int64
	for k, v := range data {
		n += int64(len(k) + len(v))
	}
	return n
}

// pendingItem is one planned Secret and its bytes.
type pendingItem struct {
	key   types.NamespacedName
	bytes int64
}

// usage is a number of Secrets and their bytes.
type usage struct {
	count int
	bytes int64
}

// ledger is this replica's part of the count of Bound, with no client: the room held by its
// writes in flight (reservations), and the Secrets they created that its cache does not show yet
// (unseen). It is not safe for concurrent use; its zero value is ready.
type ledger struct {
	unseen        map[types.NamespacedName]int64
	unseenBytes   int64
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

// reserve holds room for the items that neither exist (the cache shows them: a write reuses them)
// nor are unseen, unless cluster (what the cache counts), the unseen Secrets, the writes in flight
// and they together would pass maxBytes or maxCount.
func (l *ledger) reserve(items []pendingItem, exists func(types.NamespacedName) bool, cluster usage, maxBytes int64, maxCount int) (*reservation, bool) {
	var fresh []pendingItem
	for _, it := range items {
		if _, ok := l.unseen[it.key]; !ok && !exists(it.key) {
			fresh = append(fresh, it)
		}
	}
	r := reservationOf(fresh)
	if cluster.bytes+l.unseenBytes+l.reservedBytes+r.bytes > maxBytes || cluster.count+len(l.unseen)+l.reservedCount+r.count > maxCount {
		return nil, false
	}
	l.reservedBytes += r.bytes
	l.reservedCount += r.count
	return r, true
}

// settle gives r's room back and counts the Secrets created that the cache does not show yet.
func (l *ledger) settle(r *reservation, created []pendingItem, exists func(types.NamespacedName) bool) {
	l.reservedBytes -= r.bytes
	l.reservedCount -= r.count
	for _, it := range created {
		if _, ok := l.unseen[it.key]; ok || exists(it.key) {
			continue
		}
		if l.unseen == nil {
			l.unseen = map[types.NamespacedName]int64{}
		}
		l.unseen[it.key] = it.bytes
		l.unseenBytes += it.bytes
	}
}

// seen stops counting the Secret key as unseen: the cache shows it (or it is gone).
func (l *ledger) seen(key types.NamespacedName) {
	if n, ok := l.unseen[key]; ok {
		delete(l.unseen, key)
		l.unseenBytes -= n
	}
}
