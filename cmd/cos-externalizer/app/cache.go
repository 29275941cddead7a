package app

import (
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// CacheOptions are the options of the manager's cache (cacheOptions), for the tests that check what
// it holds.
func CacheOptions(systemNamespace string) cache.Options {
	return cacheOptions(systemNamespace, nil)
}

// secretMetadataOnly is the transform of the manager's Secret informer: it drops the data of every
// Secret before the cache stores it, so that the cache's memory does not grow with the bytes the
// cluster stores in object-data Secrets (1 MiB each at most, any number of them). Everything else
// stays: type, immutable, labels, annotations, owner references, uid, resourceVersion. The
// reconciler reads content uncached when it resolves (controllers/resolve.go); the other readers of
// the cache (Secret ownership, the orphan sweep, the Secret guard's index, the status collector) need
// metadata only. Writes of a cached Secret are merge patches of the fields they change, so a copy
// without data never writes `data`. Objects other than a typed Secret (an unstructured managed
// object shares the informer's configuration, not this informer) pass unchanged.
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
		}
		return obj, nil
	}
}
