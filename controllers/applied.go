package controllers

import (
	"crypto/sha256"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// appliedObjects remembers, per managed object, what was last applied and what the object looked
// like right after, so that a reconcile can skip server-side applies that would change nothing:
// a no-op apply of a large CustomResourceDefinition costs the API server hundreds of milliseconds.
// It lives in memory only: after a restart every object is applied once again.
type appliedObjects struct {
	mu sync.Mutex
	m  map[appliedKey]appliedState
}

type appliedKey struct {
	cos  types.UID
	gvk  schema.GroupVersionKind
	name client.ObjectKey
}

type appliedState struct {
	digest          [sha256.Size]byte
	generation      int64
	resourceVersion string
}

// record notes an apply of the canonical bytes desired, whose result is in obj.
func (a *appliedObjects) record(k appliedKey, desired []byte, obj *unstructured.Unstructured) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[appliedKey]appliedState{}
	}
	a.m[k] = appliedState{digest: sha256.Sum256(desired), generation: obj.GetGeneration(), resourceVersion: obj.GetResourceVersion()}
}

// unchanged reports whether applying desired again would change nothing: the same bytes were
// applied last time, and the live object has not changed since — same generation for objects that
// have one (status updates do not count), else the same resourceVersion.
func (a *appliedObjects) unchanged(k appliedKey, desired []byte, live *unstructured.Unstructured) bool {
	if live == nil {
		return false
	}
	a.mu.Lock()
	st, ok := a.m[k]
	a.mu.Unlock()
	if !ok || st.digest != sha256.Sum256(desired) {
		return false
	}
	if live.GetGeneration() != 0 {
		return live.GetGeneration() == st.generation
	}
	return live.GetResourceVersion() == st.resourceVersion
}

// forget drops what was recorded for the objects of one ClusterObjectSet.
func (a *appliedObjects) forget(cos types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.m {
		if k.cos == cos {
			delete(a.m, k)
		}
	}
}
