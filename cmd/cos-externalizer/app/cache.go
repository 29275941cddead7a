package app

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/drift"
	"github.com/cos-externalizer/cos-externalizer/internal/finalizerowner"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// CacheOptions are the options of the manager's cache (cacheOptions), for the tests that check what
// it holds.
func CacheOptions(systemNamespace string) cache.Options {
	return cacheOptions(systemNamespace, nil)
}

// secretMetadataOnly is the transform of the manager's Secret informer: it drops the data of every
// Secret before the cache stores it, so that the cache's memory does not grow with the bytes the
// cluster stores in object-data Secrets (1 MiB each at most, any number of them), and its
// managedFields (a field per data key), which nothing reads from the cache. Everything else stays:
// type, immutable, labels, annotations, owner references, uid, resourceVersion. The reconciler reads
// content uncached when it resolves (controllers/resolve.go); the other readers of the cache (Secret
// ownership, the orphan sweep, the Secret guard's index, the status collector) need metadata only.
// Writes of a cached Secret are merge patches of the fields they change, so a copy without data never
// writes `data`. Objects other than a typed Secret (the metadata of a Secret the reconciler manages
// shares the informer's configuration, not this informer) pass unchanged.
//
// measure, when set, is called with each Secret before its data is dropped: the bound on
// unreferenced Secrets keeps their sizes (unreferenced.Bound.RecordSize), a number per Secret,
// rather than the data. A Secret without data is not measured: an informer transforms the objects of
// its initial list twice (client-go's watch-list passes them through a temporary store first), and
// the second pass must not record the first's size as 0; a Secret whose data is empty is 0 anyway.
func secretMetadataOnly(measure func(*corev1.Secret)) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if sec, ok := obj.(*corev1.Secret); ok {
			if measure != nil && sec.Data != nil {
				measure(sec)
			}
			sec.Data = nil
			sec.StringData = nil
			sec.ManagedFields = nil
			leanMeta(&sec.ObjectMeta)
		}
		return obj, nil
	}
}

// clusterObjectSetLean is the transform of the manager's ClusterObjectSet informer. The cache keeps
// every field the manager reads, and drops or shares what it does not:
//   - managedFields: only the entries that own a finalizer, and of those only the fields under
//     metadata.finalizers (finalizerowner.Owners is their only reader: whose the teardown finalizer is);
//   - kubectl's last-applied annotation, a second copy of the spec that nothing reads from the cache;
//   - the strings of the refs: refs to one Secret share one copy of its name and namespace; common
//     strings of the metadata are shared by every object (leanMeta);
//   - of an archived ClusterObjectSet whose teardown is over (archivedDone), the objects of its phases
//     beyond what tells which Secrets it references (trimArchived).
//
// Writes of a cached ClusterObjectSet are merge patches computed between two copies of it, so what
// the cache left out is never written. Other objects pass unchanged.
func clusterObjectSetLean(obj any) (any, error) {
	cos, ok := obj.(*olmv1.ClusterObjectSet)
	if !ok {
		return obj, nil
	}
	cos.ManagedFields = finalizerEntries(cos.ManagedFields)
	delete(cos.Annotations, admission.LastAppliedAnnotation)
	leanMeta(&cos.ObjectMeta)
	if archivedDone(cos) {
		trimArchived(cos.Spec.Phases)
	}
	shared := map[string]string{}
	share := func(s *string) {
		if *s == "" {
			return
		}
		if v, ok := shared[*s]; ok {
			*s = v
			return
		}
		shared[*s] = *s
	}
	for i := range cos.Spec.Phases {
		for j := range cos.Spec.Phases[i].Objects {
			ref := &cos.Spec.Phases[i].Objects[j].Ref
			share(&ref.Name)
			share(&ref.Namespace)
		}
	}
	return cos, nil
}

// archivedDone: cos is archived, not being deleted, and holds no teardown finalizer (ours or OLM's):
// its teardown is over, and its objects are read for nothing but the Secrets they reference (who uses
// a Secret: Secret ownership, the orphan sweep, the Secret guard, the bound on unreferenced Secrets).
// Archived is final, and no finalizer is added to an archived ClusterObjectSet.
func archivedDone(cos *olmv1.ClusterObjectSet) bool {
	return cos.Spec.LifecycleState == olmv1.LifecycleStateArchived && cos.DeletionTimestamp.IsZero() &&
		!slices.Contains(cos.Finalizers, finalizerowner.Teardown)
}

// trimArchived keeps, of the objects of phases, what tells which Secrets they reference and where
// each is first referenced (olmv1.ClusterObjectSet.ReferencedSecrets and RefTo answer as on the
// whole object): each phase keeps its objects up to the last first ref to a Secret (the first ref of
// the whole spec to a ref's namespace and name, as written), and the inline objects among those are
// emptied (still inline, no content). Typically a phase keeps one ref, or none.
func trimArchived(phases []olmv1.ClusterObjectSetPhase) {
	type written struct{ namespace, name string }
	seen := map[written]bool{}
	for i := range phases {
		objs := phases[i].Objects
		keep := 0
		for j := range objs {
			if !objs[j].IsRef() {
				continue
			}
			if key := (written{objs[j].Ref.Namespace, objs[j].Ref.Name}); !seen[key] {
				seen[key] = true
				keep = j + 1
			}
		}
		kept := make([]olmv1.ClusterObjectSetObject, keep)
		copy(kept, objs[:keep])
		for j := range kept {
			if !kept[j].IsRef() {
				kept[j].Object = unstructured.Unstructured{Object: map[string]any{}}
			}
		}
		phases[i].Objects = kept
	}
}

// leanMeta shares the strings of m that many cached objects repeat (label and annotation keys, label
// values, owner references, managedFields' managers and versions) through unique, and drops the
// times of managedFields, which nothing reads from the cache.
func leanMeta(m *metav1.ObjectMeta) {
	m.Labels = internLabels(m.Labels)
	leanMetaButLabels(m)
}

// internLabels is labels with its keys and values interned.
func internLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[intern(k)] = intern(v)
	}
	return out
}

// leanMetaButLabels is leanMeta but for the labels.
func leanMetaButLabels(m *metav1.ObjectMeta) {
	if len(m.Annotations) > 0 {
		annotations := make(map[string]string, len(m.Annotations))
		for k, v := range m.Annotations {
			annotations[intern(k)] = v
		}
		m.Annotations = annotations
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name, r.UID = intern(r.APIVersion), intern(r.Kind), intern(r.Name), types.UID(intern(string(r.UID)))
	}
	for i := range m.ManagedFields {
		e := &m.ManagedFields[i]
		e.Manager, e.APIVersion, e.FieldsType, e.Subresource = intern(e.Manager), intern(e.APIVersion), intern(e.FieldsType), intern(e.Subresource)
		e.Operation = metav1.ManagedFieldsOperationType(intern(string(e.Operation)))
		e.Time = nil
	}
}

func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// finalizerEntries keeps the entries of managed that own fields under metadata.finalizers, each with
// only those fields; nil when none does. An entry whose fieldsV1 cannot be read is dropped: it owns no
// finalizer for finalizerowner.Owners either.
func finalizerEntries(managed []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range managed {
		if e.FieldsV1 == nil || !bytes.Contains(e.FieldsV1.GetRawBytes(), []byte(`"f:finalizers"`)) {
			continue
		}
		var fields struct {
			Metadata struct {
				Finalizers json.RawMessage `json:"f:finalizers"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil || len(fields.Metadata.Finalizers) == 0 {
			continue
		}
		raw, err := json.Marshal(map[string]map[string]json.RawMessage{"f:metadata": {"f:finalizers": fields.Metadata.Finalizers}})
		if err != nil {
			continue
		}
		e.FieldsV1 = metav1.NewFieldsV1(string(raw))
		out = append(out, e)
	}
	return out
}

// managedObjectLean is the transform of the informers of managed objects. The reconciler watches
// them as metadata (controllers.kindWatches) and decides from it whether an object holds what it
// would apply; it reads whole objects from the cache only for kinds where that decision or a
// readiness probe needs their content, and takes managedFields from the metadata then. So the
// metadata keeps what those readers read, and no more (docs/design.md, "What the cache holds"):
//   - of the annotations, only the digest of what we applied, the no-op decision's input, kept in
//     selfLink rather than a map of one entry (drift.StashDigest): nothing reads another annotation
//     of the metadata (a probe that reads content reads the whole object; collisions and take-overs
//     are decided on a fresh read);
//   - the labels, which a custom probe may select by (probes.NeedsContent);
//   - the owner references, which map an event to the controlling ClusterObjectSet;
//   - managedFields, the no-op decision's input, without their times;
//   - the rest of the metadata (name, uid, resourceVersion, generation, deletion, finalizers).
//
// Labels, owner references and managedFields are equal across the objects of one kind and revision,
// typically: equal ones are one copy, shared (shareTable), and common strings are shared (leanMeta).
// Cached objects are never changed in place (the cache hands out copies, and the readers that skip
// the copy only read), so sharing is invisible to their readers. Whole objects lose managedFields and
// kubectl's last-applied annotation. Other objects (the typed ClusterObjectSets and Secrets have
// transforms of their own) pass unchanged.
func managedObjectLean(obj any) (any, error) {
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		drift.StashDigest(&o.ObjectMeta)
		leanMetaButLabels(&o.ObjectMeta)
		o.Namespace = intern(o.Namespace)
		o.APIVersion, o.Kind = intern(o.APIVersion), intern(o.Kind)
		o.Labels = shareLabels(o.Labels)
		o.OwnerReferences = shareOwnerReferences(o.OwnerReferences)
		o.ManagedFields = shareManagedFields(o.ManagedFields)
	case *unstructured.Unstructured:
		if md, ok := o.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			if ann, ok := md["annotations"].(map[string]any); ok {
				delete(ann, admission.LastAppliedAnnotation)
			}
		}
	}
	return obj, nil
}

// The tables of the managed objects' transform (managedObjectLean); informers of several kinds call
// it at once. At 10,000 ClusterObjectSets (2,000 Active, objects of two kinds each) there are about
// 4,000 distinct managedFields and 2,000 distinct label maps and owner references, 2 MB in all.
var (
	sharedLabels          = newShareTable(maps.Equal[map[string]string])
	sharedOwnerReferences = newShareTable(deepEqual[[]metav1.OwnerReference])
	sharedManagedFields   = newShareTable(deepEqual[[]metav1.ManagedFieldsEntry])
)

// A shareTable's bounds: a generation ends at shareKeys keys or shareBytes bytes of values, and
// values larger than shareLargest are not shared (they are seldom equal, and would end generations).
const (
	shareKeys    = 8192
	shareBytes   = 4 << 20
	shareLargest = 16 << 10
)

// shareTable hands out one value per content: the first value stored under a key (the SHA-256 of the
// value's content, shareKey) is returned for every later equal one. It remembers two generations, the
// newer one of at most shareKeys keys and shareBytes bytes (a key found in the older one moves to the
// newer one), so that what no cached object holds any more is forgotten after two generations: the
// table holds at most twice shareBytes beyond what cached objects hold. A value the table forgot is
// still correct, only no longer shared with new ones.
type shareTable[V any] struct {
	mu        sync.Mutex
	cur, prev map[[sha256.Size]byte]V
	curBytes  int
	// equal tells a stored value from a new one under the same key (never, but for a collision of
	// SHA-256).
	equal func(a, b V) bool
}

func newShareTable[V any](equal func(a, b V) bool) *shareTable[V] {
	return &shareTable[V]{equal: equal}
}

// share returns the value stored under key if it equals v, else made() (v, or a leaner copy of it),
// stored under key when size (v's, in bytes) allows it and the key is free.
func (t *shareTable[V]) share(key [sha256.Size]byte, v V, size int, made func() V) V {
	if size > shareLargest {
		return made()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.cur[key]; ok {
		if t.equal(s, v) {
			return s
		}
		return made()
	}
	s, ok := t.prev[key]
	switch {
	case ok && !t.equal(s, v):
		return made()
	case !ok:
		s = made()
	}
	if t.cur == nil || len(t.cur) >= shareKeys || t.curBytes+size > shareBytes {
		t.prev, t.cur, t.curBytes = t.cur, map[[sha256.Size]byte]V{}, 0
	}
	t.cur[key] = s
	t.curBytes += size
	return s
}

// shareKey collects a value's parts, each prefixed by its length so that no two values have the same
// parts; its key is their SHA-256, its size their bytes.
type shareKey struct{ buf []byte }

func (k *shareKey) add(parts ...string) {
	for _, p := range parts {
		k.buf = binary.AppendUvarint(k.buf, uint64(len(p)))
		k.buf = append(k.buf, p...)
	}
}

func (k *shareKey) addBytes(p []byte) {
	k.buf = binary.AppendUvarint(k.buf, uint64(len(p)))
	k.buf = append(k.buf, p...)
}

func (k *shareKey) sum() [sha256.Size]byte { return sha256.Sum256(k.buf) }

func (k *shareKey) size() int { return len(k.buf) }

func deepEqual[V any](a, b V) bool { return reflect.DeepEqual(a, b) }

// shareLabels is the shared map equal to labels (nil for none), its keys and values interned.
func shareLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(labels))
	var key shareKey
	for _, k := range keys {
		key.add(k, labels[k])
	}
	return sharedLabels.share(key.sum(), labels, key.size()+300, func() map[string]string { return internLabels(labels) })
}

// shareOwnerReferences is the shared slice equal to refs (nil for none).
func shareOwnerReferences(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	flag := func(b *bool) string {
		if b == nil {
			return ""
		}
		return strconv.FormatBool(*b)
	}
	var key shareKey
	for _, r := range refs {
		key.add(r.APIVersion, r.Kind, r.Name, string(r.UID), flag(r.Controller), flag(r.BlockOwnerDeletion))
	}
	return sharedOwnerReferences.share(key.sum(), refs, key.size(), func() []metav1.OwnerReference { return refs })
}

// shareManagedFields is the shared slice equal to entries (nil for none); their times are dropped
// already (leanMeta).
func shareManagedFields(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	if len(entries) == 0 {
		return nil
	}
	var key shareKey
	for _, e := range entries {
		key.add(e.Manager, string(e.Operation), e.APIVersion, e.FieldsType, e.Subresource)
		if e.FieldsV1 != nil {
			key.add("fieldsV1")
			key.addBytes(e.FieldsV1.GetRawBytes())
		}
		if e.Time != nil {
			key.add("time", e.Time.UTC().Format(time.RFC3339))
		}
	}
	return sharedManagedFields.share(key.sum(), entries, key.size(), func() []metav1.ManagedFieldsEntry { return entries })
}
