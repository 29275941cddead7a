package controllers

import (
	"context"
	"sync"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/objectdata"
)

// kindWatches starts a watch for each kind of managed object the first time one is applied, so that
// readiness changes and deletions wake the controlling ClusterObjectSet. The cache behind them holds
// only objects carrying olmv1.LabelOwningRevision.
type kindWatches struct {
	ctrl   controller.Controller
	cache  cache.Cache
	scheme *runtime.Scheme
	mapper apimeta.RESTMapper

	mu   sync.Mutex
	seen map[schema.GroupVersionKind]bool
}

func (w *kindWatches) ensure(_ context.Context, gvk schema.GroupVersionKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[gvk] {
		return nil
	}
	// Metadata is enough to map an event to the controlling ClusterObjectSet, and the cache behind
	// the watch is what the no-op decision reads (cachedLive).
	u := &metav1.PartialObjectMetadata{}
	u.SetGroupVersionKind(gvk)
	src := source.Kind[client.Object](w.cache, u,
		handler.EnqueueRequestForOwner(w.scheme, w.mapper, &olmv1.ClusterObjectSet{}, handler.OnlyControllerOwner()))
	if err := w.ctrl.Watch(src); err != nil {
		return err
	}
	if w.seen == nil {
		w.seen = map[schema.GroupVersionKind]bool{}
	}
	w.seen[gvk] = true
	return nil
}

// cosForSecret maps a Secret event to the ClusterObjectSets that reference it (objectdata.RefIndex).
func (r *ClusterObjectSetReconciler) cosForSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	referrers, err := objectdata.Referrers(ctx, r.Client, client.ObjectKeyFromObject(obj))
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, len(referrers))
	for i := range referrers {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&referrers[i])}
	}
	return reqs
}
