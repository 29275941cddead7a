package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// contentSecret is a Secret of size bytes of data (key and value), or metadata only (size 0).
func contentSecret(name, uid, rv string, immutable bool, size int) *corev1.Secret {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "olmv1-system", Name: name, UID: types.UID(uid), ResourceVersion: rv},
		Immutable:  ptr.To(immutable),
	}
	if size > 0 {
		sec.Data = map[string][]byte{"k": []byte(strings.Repeat("x", size-1))}
	}
	return sec
}

// TestSecretContents: a Secret's data is found only for the version read (uid and resourceVersion),
// only immutable Secrets are kept, and the least recently used go first past the bound.
func TestSecretContents(t *testing.T) {
	type op struct {
		put *corev1.Secret // or get:
		get *corev1.Secret
	}
	for name, tc := range map[string]struct {
		max  int64
		ops  []op
		hits []bool // of the gets, in order
		size int64
	}{
		"the version read": {
			max:  100,
			ops:  []op{{put: contentSecret("a", "u1", "1", true, 10)}, {get: contentSecret("a", "u1", "1", true, 0)}},
			hits: []bool{true},
			size: 10,
		},
		"another resourceVersion is read again": {
			max:  100,
			ops:  []op{{put: contentSecret("a", "u1", "1", true, 10)}, {get: contentSecret("a", "u1", "2", true, 0)}},
			hits: []bool{false},
			size: 10,
		},
		"a replaced Secret (another uid) is read again": {
			max:  100,
			ops:  []op{{put: contentSecret("a", "u1", "1", true, 10)}, {get: contentSecret("a", "u2", "1", true, 0)}},
			hits: []bool{false},
			size: 10,
		},
		"a newer version replaces the older": {
			max: 100,
			ops: []op{
				{put: contentSecret("a", "u1", "1", true, 10)}, {put: contentSecret("a", "u1", "2", true, 20)},
				{get: contentSecret("a", "u1", "1", true, 0)}, {get: contentSecret("a", "u1", "2", true, 0)},
			},
			hits: []bool{false, true},
			size: 20,
		},
		"mutable Secrets are not kept": {
			max:  100,
			ops:  []op{{put: contentSecret("a", "u1", "1", false, 10)}, {get: contentSecret("a", "u1", "1", false, 0)}},
			hits: []bool{false},
		},
		"none larger than a quarter of the bound": {
			max:  100,
			ops:  []op{{put: contentSecret("a", "u1", "1", true, 26)}, {get: contentSecret("a", "u1", "1", true, 0)}},
			hits: []bool{false},
		},
		"the least recently used go first": {
			max: 60,
			ops: []op{
				{put: contentSecret("a", "u1", "1", true, 15)}, {put: contentSecret("b", "u2", "1", true, 15)},
				{put: contentSecret("c", "u3", "1", true, 15)},
				{get: contentSecret("a", "u1", "1", true, 0)}, // a is used: b is now the oldest
				{put: contentSecret("d", "u4", "1", true, 15)}, {put: contentSecret("e", "u5", "1", true, 15)},
				{get: contentSecret("a", "u1", "1", true, 0)}, {get: contentSecret("b", "u2", "1", true, 0)},
				{get: contentSecret("c", "u3", "1", true, 0)}, {get: contentSecret("e", "u5", "1", true, 0)},
			},
			hits: []bool{true, true, false, true, true},
			size: 60,
		},
		"nothing kept with no bound": {
			max:  0,
			ops:  []op{{put: contentSecret("a", "u1", "1", true, 1)}, {get: contentSecret("a", "u1", "1", true, 0)}},
			hits: []bool{false},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newSecretContents(tc.max)
			var hits []bool
			for _, o := range tc.ops {
				if o.put != nil {
					s.put(o.put)
					continue
				}
				_, ok := s.get(o.get)
				hits = append(hits, ok)
			}
			if diff := cmp.Diff(tc.hits, hits); diff != "" {
				t.Errorf("hits (-want +got):\n%s", diff)
			}
			if got := s.bytes(); got != tc.size {
				t.Errorf("bytes kept: %d, want %d", got, tc.size)
			}
		})
	}
	var none *secretContents
	none.put(contentSecret("a", "u1", "1", true, 1))
	if _, ok := none.get(contentSecret("a", "u1", "1", true, 0)); ok {
		t.Error("a nil store found data")
	}
}
