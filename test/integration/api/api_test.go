// Package api_test checks the ClusterObjectSet CRD against a real API server: every schema and CEL
// rule accepts what it should and refuses what it should, with the exact field path and message.
package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

func TestMain(m *testing.M) { testenv.Run(m) }

var (
	mu     sync.Mutex
	dumped = map[string][]corpus.Cause{}
)

func TestCorpus(t *testing.T) {
	defer func() {
		if dump := os.Getenv("CORPUS_DUMP"); dump != "" {
			b, _ := json.MarshalIndent(dumped, "", "  ")
			_ = os.WriteFile(dump, b, 0o600)
		}
	}()
	ctx := context.Background()
	for name, tc := range corpus.Cases() {
		t.Run(name, func(t *testing.T) {
			err := submit(ctx, t, "api-", name, tc.Old, tc.New, nil)
			got := causes(t, err)
			if dump := os.Getenv("CORPUS_DUMP"); dump != "" {
				mu.Lock()
				dumped[name] = got
				mu.Unlock()
			}
			if diff := cmp.Diff(tc.Want, got); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
		})
	}
}

// submit creates updated, or with old creates old and updates it to updated, under a name made of
// prefix and a hash of caseName (deleted when the test ends), and returns the API server's answer.
// before, when not nil, sees the objects as they are sent: old as the API server stored it (nil on
// create) and the other.
func submit(ctx context.Context, t *testing.T, prefix, caseName string, old, updated *olmv1.ClusterObjectSet, before func(old, obj *olmv1.ClusterObjectSet)) error {
	t.Helper()
	c := testenv.Env.Client
	sum := sha256.Sum256([]byte(caseName))
	objName := prefix + hex.EncodeToString(sum[:6])
	t.Cleanup(func() { // so that the test runs again (-count)
		_ = c.Delete(context.Background(), &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: objName}})
	})
	obj := updated.DeepCopy()
	obj.Name = objName
	if old == nil {
		if before != nil {
			before(nil, obj)
		}
		return c.Create(ctx, obj)
	}
	stored := old.DeepCopy()
	stored.Name = objName
	if err := c.Create(ctx, stored); err != nil {
		t.Fatalf("creating the old object: %v", err)
	}
	obj.ResourceVersion = stored.ResourceVersion
	if before != nil {
		before(stored, obj)
	}
	return c.Update(ctx, obj)
}

// causes returns the field errors of an Invalid error, sorted; nil for success.
func causes(t *testing.T, err error) []corpus.Cause {
	t.Helper()
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.Status().Details == nil {
		t.Fatalf("want an Invalid error with details, got %v", err)
	}
	var out []corpus.Cause
	for _, c := range status.Status().Details.Causes {
		out = append(out, corpus.Cause{Field: c.Field, Message: c.Message})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Field != out[j].Field {
			return out[i].Field < out[j].Field
		}
		return out[i].Message < out[j].Message
	})
	return out
}
