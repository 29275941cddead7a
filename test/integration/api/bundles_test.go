package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// etcdLimit is etcd's default request size limit (--max-request-bytes), which caps a stored object.
const etcdLimit = 1536 * 1024

// TestInlineBundles shows the problem this project exists for: as inline ClusterObjectSets, the
// prometheus-operator CRDs (~2.8 MB) are refused by the storage layer, the Argo CD install (~650 KB)
// is stored.
func TestInlineBundles(t *testing.T) {
	ctx := context.Background()
	c := testenv.Env.Client

	t.Run("prometheus-operator CRDs are refused: too large to store", func(t *testing.T) {
		obj, err := builders.Bundle("inline-prometheus-operator", "prometheus-operator-crds", "monitoring")
		if err != nil {
			t.Fatal(err)
		}
		if size := jsonSize(t, obj); size <= etcdLimit || size >= 3<<20 {
			t.Fatalf("inline COS is %d bytes: want over etcd's %d and under the API server's 3 MiB request limit", size, etcdLimit)
		}
		err = c.Create(ctx, obj)
		if err == nil {
			t.Fatal("the API server stored a COS over etcd's size limit")
		}
		msg := err.Error()
		t.Logf("refused as expected: %.300s", msg)
		if !strings.Contains(msg, "request is too large") && !strings.Contains(msg, "larger than max") {
			t.Errorf("want a storage size error, got: %v", err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &olmv1.ClusterObjectSet{}); !apierrors.IsNotFound(err) {
			t.Errorf("refused COS must not exist, Get returned %v", err)
		}
	})

	t.Run("Argo CD install is stored", func(t *testing.T) {
		obj, err := builders.Bundle("inline-argocd", "argocd-install", "argocd")
		if err != nil {
			t.Fatal(err)
		}
		testenv.Env.Fresh(t, obj.Name)
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating the inline Argo CD COS (%d bytes): %v", jsonSize(t, obj), err)
		}
		got := &olmv1.ClusterObjectSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(obj.Spec, got.Spec); diff != "" {
			t.Errorf("stored spec differs from the submitted one (-submitted +stored):\n%s", diff)
		}
	})
}

func jsonSize(t *testing.T, obj any) int {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
