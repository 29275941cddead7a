package controllers

import (
	"container/list"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultSecretContentBytes is the default bound of secretContents: about 32 full object-data
// Secrets, or the refs of several large bundles.
const DefaultSecretContentBytes = 32 << 20

// secretContents keeps the data of the Secrets the reconciler read for resolution, least recently
// used first out, within a bound of stored bytes, so that a reconcile with nothing new to resolve
// (a drift check, an event of a managed object, a label) reads no Secret from the API server. An
// entry is one version of one Secret: its uid and resourceVersion, as the manager's cache has them,
// must be the ones read, so a replaced or changed Secret is always read again; a Secret has one entry,
// its latest version read. The data is shared with the resolutions that use it and must not be
// changed.
type secretContents struct {
	max int64

	mu    sync.Mutex
	size  int64
	order *list.List // of *contentEntry, most recently used first
	items map[types.NamespacedName]*list.Element
}

// secretVersion names one version of one Secret.
type secretVersion struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
}

type contentEntry struct {
	version secretVersion
	data    map[string][]byte
	size    int64
}

func versionOf(sec *corev1.Secret) secretVersion {
	return secretVersion{namespace: sec.Namespace, name: sec.Name, uid: sec.UID, resourceVersion: sec.ResourceVersion}
}

// newSecretContents returns an empty store of at most maxBytes of data; maxBytes <= 0 keeps nothing.
func newSecretContents(maxBytes int64) *secretContents {
	return &secretContents{max: maxBytes, order: list.New(), items: map[types.NamespacedName]*list.Element{}}
}

// get returns the data of the version of meta's Secret (its uid and resourceVersion), if kept.
func (s *secretContents) get(meta *corev1.Secret) (map[string][]byte, bool) {
	if s == nil || meta.UID == "" || meta.ResourceVersion == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[types.NamespacedName{Namespace: meta.Namespace, Name: meta.Name}]
	if !ok || e.Value.(*contentEntry).version != versionOf(meta) {
		return nil, false
	}
	s.order.MoveToFront(e)
	return e.Value.(*contentEntry).data, true
}

// put keeps the data of sec, a Secret as read from the API server, in place of an earlier version,
// dropping the least recently used entries past the bound. Only immutable Secrets are kept, and none
// larger than a quarter of the bound.
func (s *secretContents) put(sec *corev1.Secret) {
	if s == nil || sec.UID == "" || sec.ResourceVersion == "" || sec.Immutable == nil || !*sec.Immutable {
		return
	}
	var size int64
	for k, v := range sec.Data {
		size += int64(len(k) + len(v))
	}
	if size > s.max/4 {
		return
	}
	name := types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.items[name]; ok {
		s.size -= old.Value.(*contentEntry).size
		s.order.Remove(old)
	}
	s.items[name] = s.order.PushFront(&contentEntry{version: versionOf(sec), data: sec.Data, size: size})
	s.size += size
	for s.size > s.max {
		last := s.order.Back()
		e := last.Value.(*contentEntry)
		s.order.Remove(last)
		delete(s.items, types.NamespacedName{Namespace: e.version.namespace, Name: e.version.name})
		s.size -= e.size
	}
}

// bytes is the data kept, in bytes.
func (s *secretContents) bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}
