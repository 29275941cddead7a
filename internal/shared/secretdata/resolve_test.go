package secretdata

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
)

// TestSecretResolverRequestBudget: with the request's Budget in its context, SecretResolver draws from
// it (its reservation first), does not release it when ctx ends (its owner does), and without room at
// once fails with ErrBusy naming the admission flag, telling nothing of the value.
func TestSecretResolverRequestBudget(t *testing.T) {
	value := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`)
	key := content.Key(value)
	get := func(context.Context, types.NamespacedName) (*corev1.Secret, error) { //nolint:unparam // GetSecretFunc
		return &corev1.Secret{Data: map[string][]byte{key: value}}, nil
	}
	ref := olmv1.ObjectSourceRef{Name: "s", Key: key}
	cost := func() int64 {
		b := content.NewBudget(0)
		if _, err := b.Resolve(context.Background(), "x", value, key); err != nil {
			t.Fatal(err)
		}
		return b.Used()
	}()

	tests := map[string]struct {
		reserve, othersHold int64
		wantErr             bool
		wantHeld            int64 // the request's share of the pool after resolving, until its owner's Release
	}{
		"within the reservation":       {reserve: cost, wantHeld: cost},
		"past it, with room":           {reserve: 1, wantHeld: cost},
		"past it, no room: ErrBusy":    {reserve: 1, othersHold: 1 << 20, wantErr: true, wantHeld: 1},
		"no reservation, room at once": {wantHeld: cost},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pool := content.NewPool(1<<20 + 1)
			others := pool.NewBudget(0)
			if err := others.Hold(tc.othersHold); err != nil {
				t.Fatal(err)
			}
			b := pool.NewBudget(0)
			if err := b.Reserve(context.Background(), tc.reserve); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(content.WithBudget(context.Background(), b))
			obj, err := SecretResolver(ctx, Limits{}, get, "olmv1-system")(ref)
			if tc.wantErr {
				if !errors.Is(err, content.ErrBusy) || obj != nil {
					t.Fatalf("got %v, want ErrBusy", err)
				}
				want := `secret olmv1-system/s key "` + key + `": no room in the ` + "1048577" + ` bytes of resolved content this process holds at once: ` +
					content.ErrNoWaitWhileHolding.Error() + " (the limit is --max-concurrent-admission-bytes)"
				if diff := cmp.Diff(want, err.Error()); diff != "" {
					t.Errorf("message (-want +got):\n%s", diff)
				}
				if !b.Busy() {
					t.Error("the request's Budget is not Busy")
				}
			} else if err != nil || obj["kind"] != "ConfigMap" {
				t.Fatalf("got %v, %v", obj, err)
			}
			if got := pool.Used() - tc.othersHold; got != tc.wantHeld {
				t.Errorf("the request holds %d of the pool, want %d", got, tc.wantHeld)
			}
			cancel()
			if got := pool.Used() - tc.othersHold; got != tc.wantHeld {
				t.Errorf("the request holds %d after ctx ended, want %d: the resolver released its owner's Budget", got, tc.wantHeld)
			}
			b.Release()
			others.Release()
			if got := pool.Used(); got != 0 {
				t.Errorf("pool Used = %d after every Release", got)
			}
		})
	}
}
