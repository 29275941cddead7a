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
	c := testenv.Env.Client
	for name, tc := range corpus.Cases() {
		t.Run(name, func(t *testing.T) {
			sum := sha256.Sum256([]byte(name))
			objName := "api-" + hex.EncodeToString(sum[:6])
			testenv.Env.Fresh(t, objName)
			var err error
			if tc.Old == nil {
				obj := tc.New.DeepCopy()
				obj.Name = objName
				err = c.Create(ctx, obj)
			} else {
				old := tc.Old.DeepCopy()
				old.Name = objName
				if err := c.Create(ctx, old); err != nil {
					t.Fatalf("creating the old object: %v", err)
				}
				obj := tc.New.DeepCopy()
				obj.Name = objName
				obj.ResourceVersion = old.ResourceVersion
				err = c.Update(ctx, obj)
			}
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
