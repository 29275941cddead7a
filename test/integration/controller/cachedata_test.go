package controller_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// managerCache starts a cache with the manager's options (app.CacheOptions) against the control plane
// and stops it when the test ends.
func managerCache(t *testing.T) cache.Cache {
	t.Helper()
	opts := app.CacheOptions(testenv.SystemNamespace)
	opts.Scheme = scheme.New()
	cc, err := cache.New(testenv.Env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	framework.Start(ctx, t, "the cache", cc.Start)
	return cc
}

// TestCacheHoldsSecretMetadataOnly (issue 27, item 1): the manager's cache holds object-data Secrets
// without their data, the reconciler still rolls refs out (reading content uncached) and resolves them
// again on a later reconcile, and the ownership patch computed from a cached copy without data leaves
// the Secret's data as written.
func TestCacheHoldsSecretMetadataOnly(t *testing.T) {
	const name = "cache-metadata-only"
	const n = 3
	cos := builders.COS(name,
		builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", name, n)...))
	create(t, cos)
	testenv.Env.RemoveWithSecretsAfter(t, name)
	stored := getCOS(t, name)
	refs := stored.ReferencedSecrets(testenv.SystemNamespace)
	if len(refs) == 0 {
		t.Fatal("the ClusterObjectSet was not externalized")
	}
	written := map[string]map[string][]byte{}
	for _, s := range testenv.Env.ObjectDataSecrets(t, name) {
		written[s.Name] = s.Data
	}
	if len(written) != len(refs) {
		t.Fatalf("%d object-data Secrets for %d referenced", len(written), len(refs))
	}

	testenv.Env.WaitForCondition(t, name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	checkConfigMaps := func() {
		t.Helper()
		for i := range n {
			cm := &corev1.ConfigMap{}
			if err := c().Get(ctx, client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("%s-%d", name, i)}, cm); err != nil {
				t.Fatalf("the rolled-out ConfigMap: %v", err)
			}
			if diff := cmp.Diff(map[string]string{"i": fmt.Sprint(i)}, cm.Data); diff != "" {
				t.Errorf("ConfigMap %s data (-want +got):\n%s", cm.Name, diff)
			}
		}
	}
	checkConfigMaps()

	// Ownership patched the Secrets from cached copies without data: the data is as written.
	owned := testenv.Env.WaitOwned(t, name)
	for _, s := range owned {
		if diff := cmp.Diff(written[s.Name], s.Data); diff != "" {
			t.Errorf("Secret %s data after the ownership patch (-written +now):\n%s", s.Name, diff)
		}
	}

	// What the manager's cache holds: each Secret as the API server has it, without its data and
	// managedFields.
	cc := managerCache(t)
	for _, s := range owned {
		var got corev1.Secret
		framework.Eventually(ctx, t, "the cache to have Secret "+s.Name, func(ctx context.Context) (bool, string) {
			if err := cc.Get(ctx, client.ObjectKeyFromObject(&s), &got); err != nil {
				return false, err.Error()
			}
			return got.ResourceVersion == s.ResourceVersion, "resourceVersion " + got.ResourceVersion + ", want " + s.ResourceVersion
		})
		want := s.DeepCopy()
		want.Data, want.ManagedFields = nil, nil
		if diff := cmp.Diff(want, &got, cmpopts.IgnoreFields(corev1.Secret{}, "TypeMeta")); diff != "" {
			t.Errorf("cached Secret %s (-want +got):\n%s", s.Name, diff)
		}
	}

	// A later reconcile resolves the refs again, from content read uncached (the cache has none): a
	// deleted ConfigMap comes back with its data.
	gone := &corev1.ConfigMap{}
	if err := c().Get(ctx, client.ObjectKey{Namespace: "default", Name: name + "-0"}, gone); err != nil {
		t.Fatal(err)
	}
	if err := c().Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "the deleted ConfigMap back", func(ctx context.Context) (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c().Get(ctx, client.ObjectKeyFromObject(gone), cm); err != nil {
			return false, err.Error()
		}
		return cm.UID != gone.UID, "still the deleted one"
	})
	checkConfigMaps()
}
