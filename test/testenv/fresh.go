package testenv

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Fresh frees the names of ClusterObjectSets a test is about to create from what an earlier run of
// it in the same process (-count) left: each one still there is deleted and waited for, with its
// teardown (its objects, CRDs included, so that the next one is not refused as a collision) and its
// object-data Secrets (DeleteWithSecrets). Where nothing is left over it costs one read a name, so
// tests call it before they create instead of waiting in a cleanup at the end of every run. Names
// go in the order given: the Active revision before the Archived ones it took over from.
func (e *Environment) Fresh(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		err := e.Client.Get(context.Background(), client.ObjectKey{Name: n}, &olmv1.ClusterObjectSet{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatalf("looking for a leftover ClusterObjectSet %s: %v", n, err)
		}
		t.Logf("deleting ClusterObjectSet %s, left by an earlier run", n)
		e.DeleteWithSecrets(t, n)
	}
}
