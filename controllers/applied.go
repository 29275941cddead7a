package controllers

import (
	"crypto/sha256"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/drift"
)

// appliedObjects remembers, per managed object, what was last applied and what the object held at the
// applied fields right after (drift.Fingerprint), so that a reconcile can skip server-side applies
// that would change nothing: a no-op apply of a large CustomResourceDefinition costs the API server
// hundreds of milliseconds. An apply is skipped only while the live object still holds, at every field
// we apply, what it held after our apply: drift at any of them (a label removed, an annotation or a
// spec field changed) is restored by the next reconcile. It lives in memory only: after a restart
// every object is applied once again.
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
	// digest is of the canonical bytes applied.
	digest [sha256.Size]byte
	// fingerprint is of the object returned by the apply, at the applied fields.
	fingerprint [sha256.Size]byte
}

// record notes an apply of desired (its canonical bytes and its fields, shape) whose result is obj.
func (a *appliedObjects) record(k appliedKey, desired []byte, shape map[string]any, obj *unstructured.Unstructured) {
	fp, err := drift.Fingerprint(shape, obj.Object)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		delete(a.m, k) // cannot tell next time: apply again
		return
	}
	if a.m == nil {
		a.m = map[appliedKey]appliedState{}
	}
	a.m[k] = appliedState{digest: sha256.Sum256(desired), fingerprint: fp}
}

// unchanged reports whether applying desired (canonical bytes, fields shape) again would change
// nothing: the same bytes were applied last time, and live holds at every applied field what the
// object held right after that apply.
func (a *appliedObjects) unchanged(k appliedKey, desired []byte, shape map[string]any, live *unstructured.Unstructured) bool {
	if live == nil {
		return false
	}
	a.mu.Lock()
	st, ok := a.m[k]
	a.mu.Unlock()
	if !ok || st.digest != sha256.Sum256(desired) {
		return false
	}
	fp, err := drift.Fingerprint(shape, live.Object)
	return err == nil && fp == st.fingerprint
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
