package app

import (
	"bytes"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/admission"
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
// unreferenced Secrets keeps their sizes (webhook.Unreferenced.RecordSize), a number per Secret,
// rather than the data.
func secretMetadataOnly(measure func(*corev1.Secret)) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if sec, ok := obj.(*corev1.Secret); ok {
			if measure != nil {
				measure(sec)
			}
			sec.Data = nil
			sec.StringData = nil
			sec.ManagedFields = nil
		}
		return obj, nil
	}
}

// clusterObjectSetLean is the transform of the manager's ClusterObjectSet informer. The cache keeps
// every field the manager reads, and drops or shares what it does not:
//   - managedFields: only the entries that own a finalizer, and of those only the fields under
//     metadata.finalizers (finalizerowner.Owners is their only reader: whose the teardown finalizer is);
//   - kubectl's last-applied annotation, a second copy of the spec that nothing reads from the cache;
//   - the strings of the refs: refs to one Secret share one copy of its name and namespace.
//
// Writes of a cached ClusterObjectSet are merge patches computed between two copies of it, so what
// the cache left out is never written. Other objects pass unchanged.
func clusterObjectSetLean(obj any) (any, error) {
	cos, ok := obj.(*olmv1.ClusterObjectSet)
	if !ok {
		return obj, nil
	}
	cos.ManagedFields = finalizerEntries(cos.ManagedFields)
	if _, ok := cos.Annotations[admission.LastAppliedAnnotation]; ok {
		delete(cos.Annotations, admission.LastAppliedAnnotation)
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

// finalizerEntries keeps the entries of managed that own fields under metadata.finalizers, each with
// only those fields; nil when none does. An entry whose fieldsV1 cannot be read is dropped: it owns no
// finalizer for finalizerowner.Owners either.
func finalizerEntries(managed []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range managed {
		if e.FieldsV1 == nil || !bytes.Contains(e.FieldsV1.Raw, []byte(`"f:finalizers"`)) {
			continue
		}
		var fields struct {
			Metadata struct {
				Finalizers json.RawMessage `json:"f:finalizers"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil || len(fields.Metadata.Finalizers) == 0 {
			continue
		}
		raw, err := json.Marshal(map[string]map[string]json.RawMessage{"f:metadata": {"f:finalizers": fields.Metadata.Finalizers}})
		if err != nil {
			continue
		}
		e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
		out = append(out, e)
	}
	return out
}

// managedObjectLean is the transform of the informers of managed objects. The reconciler watches
// them as metadata (controllers.kindWatches) and decides from it whether an object holds what it
// would apply; it reads whole objects from the cache only for kinds where that decision or a
// readiness probe needs their content, and takes managedFields from the metadata then. So:
//   - metadata keeps everything but kubectl's last-applied annotation (a copy of the object, set by
//     whoever created it with client-side apply; no decision reads it);
//   - whole objects lose managedFields too.
//
// Other objects (the typed ClusterObjectSets and Secrets have transforms of their own) pass unchanged.
func managedObjectLean(obj any) (any, error) {
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		if _, ok := o.Annotations[admission.LastAppliedAnnotation]; ok {
			delete(o.Annotations, admission.LastAppliedAnnotation)
		}
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
