// Package admissiontest holds the admission pipeline's Store in memory, for fast tests of the
// pipeline's decisions and of the front ends' translations. Behaviour against the API server stays
// with the integration tests.
package admissiontest

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// Store is an admission.Store in memory: ClusterObjectSets and Secrets by name, and Write with
// objectdata.Writer's rules for an existing Secret (exactly ours, else a *secretdata.ConflictError),
// checked before anything is written.
type Store struct {
	// Namespace holds the Secrets Write creates.
	Namespace string
	// OnGetSecret, when set, is called at every GetSecret, before it answers (tests that watch what a
	// request holds while it reads).
	OnGetSecret func(ctx context.Context, key types.NamespacedName)

	mu      sync.Mutex
	coss    map[string]*olmv1.ClusterObjectSet
	secrets map[types.NamespacedName]*corev1.Secret
	fail    map[types.NamespacedName]error
	touched map[types.NamespacedName]int
}

// NewStore returns an empty Store writing into namespace.
func NewStore(namespace string) *Store {
	return &Store{Namespace: namespace, coss: map[string]*olmv1.ClusterObjectSet{},
		secrets: map[types.NamespacedName]*corev1.Secret{}, fail: map[types.NamespacedName]error{},
		touched: map[types.NamespacedName]int{}}
}

// AddClusterObjectSet stores a copy of c.
func (s *Store) AddClusterObjectSet(c *olmv1.ClusterObjectSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.coss[c.Name] = c.DeepCopy()
}

// AddSecret stores a copy of sec.
func (s *Store) AddSecret(sec *corev1.Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}] = sec.DeepCopy()
}

// FailReads makes every read of the Secret key fail with err.
func (s *Store) FailReads(key types.NamespacedName, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[key] = err
}

// Secrets returns the stored Secrets' keys.
func (s *Store) Secrets() []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(s.secrets))
	for k := range s.secrets {
		out = append(out, k)
	}
	return out
}

// GetClusterObjectSet returns a copy of the stored ClusterObjectSet, or NotFound.
func (s *Store) GetClusterObjectSet(_ context.Context, name string) (*olmv1.ClusterObjectSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.coss[name]; ok {
		return c.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: olmv1.GroupVersion.Group, Resource: "clusterobjectsets"}, name)
}

// GetSecret returns a copy of the stored Secret, or NotFound, or the error FailReads set.
func (s *Store) GetSecret(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	if s.OnGetSecret != nil {
		s.OnGetSecret(ctx, key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail[key]; err != nil {
		return nil, err
	}
	if sec, ok := s.secrets[key]; ok {
		return sec.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
}

// Write creates the planned Secrets that are missing, unless dryRun, after checking that every
// existing one is exactly ours.
func (s *Store) Write(_ context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var create []*corev1.Secret
	for _, p := range plan.Secrets {
		want := secretdata.ObjectDataSecret(cosName, s.Namespace, p)
		key := types.NamespacedName{Namespace: s.Namespace, Name: p.Name}
		if got, ok := s.secrets[key]; ok {
			if why := secretdata.Unusable(got, want); len(why) > 0 {
				return 0, &secretdata.ConflictError{Secret: key, Why: strings.Join(why, ", ")}
			}
			continue
		}
		create = append(create, want)
	}
	if dryRun {
		return 0, nil
	}
	for _, sec := range create {
		s.secrets[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}] = sec
	}
	return len(create), nil
}

// Touch counts a touch of every existing object-data Secret of Namespace among keys and returns the
// others, as objectdata.Writer.Touch does; a key whose reads fail (FailReads) fails it.
func (s *Store) Touch(_ context.Context, keys []types.NamespacedName) ([]types.NamespacedName, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var untouched []types.NamespacedName
	for _, key := range keys {
		if err := s.fail[key]; err != nil {
			return nil, err
		}
		sec, ok := s.secrets[key]
		if key.Namespace != s.Namespace || !ok || sec.Type != olmv1.SecretTypeObjectData {
			untouched = append(untouched, key)
			continue
		}
		s.touched[key]++
	}
	return untouched, nil
}

// Touched returns how often the Secret key was touched.
func (s *Store) Touched(key types.NamespacedName) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.touched[key]
}
