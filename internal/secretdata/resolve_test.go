package secretdata_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// TestRequestResolver: RequestResolver draws from the request's Budget (its reservation first) the
// Secret it reads (ReadCost before the read, what the Secret keeps after) and the value, does not
// release it when ctx ends (its owner does), and without room at once fails with ErrBusy naming the
// admission flag, before reading, telling nothing of the value.
func TestRequestResolver(t *testing.T) {
	value := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`)
	key := content.Key(value)
	get := func(context.Context, types.NamespacedName) (*corev1.Secret, error) { //nolint:unparam // secretdata.GetSecretFunc
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

	// The Secret read is charged ReadCost before the read, then what it keeps while the request lasts.
	kept := int64((&corev1.Secret{Data: map[string][]byte{key: value}}).Size())
	const capacity = secretdata.ReadCost + 1<<20
	tests := map[string]struct {
		reserve, othersHold int64
		wantErr             bool
		wantHeld            int64 // the request's share of the pool after resolving, until its owner's Release
	}{
		"within the reservation":            {reserve: cost + kept, wantHeld: cost + kept},
		"past it, with room":                {reserve: 1, wantHeld: cost + kept},
		"past it, no room to read: ErrBusy": {reserve: 1, othersHold: 1<<20 + 1, wantErr: true, wantHeld: 1},
		"no reservation, room at once":      {wantHeld: cost + kept},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pool := content.NewPool(capacity)
			others := pool.NewBudget(0)
			if err := others.Hold(tc.othersHold); err != nil {
				t.Fatal(err)
			}
			b := pool.NewBudget(0)
			if err := b.Reserve(context.Background(), tc.reserve); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			obj, err := secretdata.RequestResolver(ctx, b, get, "olmv1-system")(ref)
			if tc.wantErr {
				if !errors.Is(err, content.ErrBusy) || obj != nil {
					t.Fatalf("got %v, want ErrBusy", err)
				}
				want := `secret olmv1-system/s key "` + key + `": no room in the ` + strconv.Itoa(capacity) + ` bytes of resolved content this process holds at once: ` +
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

// secretValue is in every stored value of the failure tests: no error may quote it.
const secretValue = "s3cr3t-value"

// TestResolverFailures: each way a ref fails is its own Reason, on the ref's Secret and key, worded
// without content, sizes or digests of content.
func TestResolverFailures(t *testing.T) {
	const ns = "olmv1-system"
	object := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"` + secretValue + `"}}`)
	noKind := []byte(`{"data":{"k":"` + secretValue + `"}}`)
	array := []byte(`["` + secretValue + `"]`)
	huge := content.Gzip([]byte(`{"data":"` + strings.Repeat(secretValue, content.MaxDecompressedSize/len(secretValue)+1) + `"}`))
	badGzip := append([]byte{0x1f, 0x8b}, []byte(secretValue)...)
	secret := func(immutable bool, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}, Immutable: ptr.To(immutable), Data: data}
	}
	readErr := errors.New("etcdserver: request timed out")

	type outcome struct {
		Reason secretdata.Reason
		Secret string
		Key    string
		Error  string
	}
	tests := map[string]struct {
		secret           *corev1.Secret
		getErr           error
		key              string
		requireImmutable bool
		limit            int64
		want             outcome
	}{
		"missing Secret": {getErr: apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "s"), key: "k",
			want: outcome{secretdata.SecretMissing, ns + "/s", "", `reading Secret olmv1-system/s: secrets "s" not found`}},
		"unreadable Secret": {getErr: readErr, key: "k",
			want: outcome{secretdata.SecretUnreadable, ns + "/s", "", "reading Secret olmv1-system/s: etcdserver: request timed out"}},
		"not immutable": {secret: secret(false, map[string][]byte{"k": object}), key: "k", requireImmutable: true,
			want: outcome{secretdata.NotImmutable, ns + "/s", "k", "secret olmv1-system/s is not immutable"}},
		"key missing": {secret: secret(true, map[string][]byte{"other": object}), key: "k",
			want: outcome{secretdata.KeyMissing, ns + "/s", "k", `secret olmv1-system/s has no key "k"`}},
		"digest mismatch": {secret: secret(true, map[string][]byte{content.Key(noKind): object}), key: content.Key(noKind),
			want: outcome{secretdata.DigestMismatch, ns + "/s", content.Key(noKind),
				`secret olmv1-system/s key "` + content.Key(noKind) + `": content does not match its key: key ` + content.Key(noKind)}},
		"too large": {secret: secret(true, map[string][]byte{"k": huge}), key: "k", limit: 1 << 30,
			want: outcome{secretdata.TooLarge, ns + "/s", "k", `secret olmv1-system/s key "k": content larger than the limit: inflates past 10485760 bytes`}},
		"over budget": {secret: secret(true, map[string][]byte{"k": object}), key: "k", limit: 10,
			want: outcome{secretdata.OverBudget, ns + "/s", "k", "the resolved content exceeds the limit of 10 bytes (the limit is --max-resolved-bytes)"}},
		"corrupt gzip": {secret: secret(true, map[string][]byte{"k": badGzip}), key: "k",
			want: outcome{secretdata.Corrupt, ns + "/s", "k", `secret olmv1-system/s key "k": corrupt content: gzip: invalid header`}},
		"not a JSON object": {secret: secret(true, map[string][]byte{"k": array}), key: "k",
			want: outcome{secretdata.NotAnObject, ns + "/s", "k", `secret olmv1-system/s key "k": corrupt content: not a valid JSON object`}},
		"not a Kubernetes object": {secret: secret(true, map[string][]byte{"k": noKind}), key: "k",
			want: outcome{secretdata.NotAnObject, ns + "/s", "k", `secret olmv1-system/s key "k": not a Kubernetes object (apiVersion and kind are required)`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			get := func(context.Context, types.NamespacedName) (*corev1.Secret, error) { return tc.secret, tc.getErr }
			r := secretdata.New(secretdata.Config{Get: get, SystemNamespace: ns, Budget: content.NewBudget(tc.limit), RequireImmutable: tc.requireImmutable})
			obj, err := r.Resolve(context.Background(), olmv1.ObjectSourceRef{Name: "s", Key: tc.key})
			var f *secretdata.Failure
			if !errors.As(err, &f) || obj != nil {
				t.Fatalf("got %v, %v; want a *Failure", obj, err)
			}
			got := outcome{f.Reason, f.Secret.String(), f.Key, f.Error()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if reason, ok := secretdata.ReasonOf(fmt.Errorf("wrapped: %w", err)); !ok || reason != tc.want.Reason {
				t.Errorf("ReasonOf = %q, %v", reason, ok)
			}
			if strings.Contains(err.Error(), secretValue) {
				t.Errorf("the error quotes content: %v", err)
			}
		})
	}
}

// TestResolverReadsOnce: each Secret is read once per Resolver (a failed read too), and refs to one
// key share one object.
func TestResolverReadsOnce(t *testing.T) {
	value := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`)
	reads := map[string]int{}
	get := func(_ context.Context, key types.NamespacedName) (*corev1.Secret, error) {
		reads[key.Name]++
		if key.Name == "gone" {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
		}
		return &corev1.Secret{Data: map[string][]byte{"k": value}}, nil
	}
	r := secretdata.New(secretdata.Config{Get: get, SystemNamespace: "sys", Budget: content.NewBudget(0)})
	resolve := r.Func(context.Background())
	a, errA := resolve(olmv1.ObjectSourceRef{Name: "s", Key: "k"})
	b, errB := resolve(olmv1.ObjectSourceRef{Name: "s", Namespace: "sys", Key: "k"})
	if errA != nil || errB != nil || a == nil || fmt.Sprintf("%p", a) != fmt.Sprintf("%p", b) {
		t.Fatalf("got %p, %v and %p, %v: want one shared object", a, errA, b, errB)
	}
	for range 2 {
		if _, err := resolve(olmv1.ObjectSourceRef{Name: "gone", Key: "k"}); err == nil {
			t.Fatal("a missing Secret resolved")
		}
	}
	if diff := cmp.Diff(map[string]int{"s": 1, "gone": 1}, reads); diff != "" {
		t.Errorf("reads (-want +got):\n%s", diff)
	}
}

// FuzzResolverValue: whatever a Secret holds under whatever key, the resolver returns an object or
// a *Failure of a known Reason on that ref, and its error quotes neither the value nor its size.
func FuzzResolverValue(f *testing.F) {
	value := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`)
	f.Add(value, content.Key(value), int64(0))
	f.Add(content.Gzip(value), "k", int64(0))
	f.Add([]byte(`{"a":1}`), "k", int64(10))
	f.Add([]byte{0x1f, 0x8b, 0x08}, "k", int64(0))
	known := map[secretdata.Reason]bool{secretdata.DigestMismatch: true, secretdata.TooLarge: true, secretdata.OverBudget: true,
		secretdata.Corrupt: true, secretdata.NotAnObject: true}
	f.Fuzz(func(t *testing.T, stored []byte, key string, limit int64) {
		get := func(context.Context, types.NamespacedName) (*corev1.Secret, error) {
			return &corev1.Secret{Data: map[string][]byte{key: stored}}, nil
		}
		r := secretdata.New(secretdata.Config{Get: get, SystemNamespace: "sys", Budget: content.NewBudget(limit)})
		v, err := r.Value(context.Background(), olmv1.ObjectSourceRef{Name: "s", Key: key})
		if v.Stored != len(stored) {
			t.Errorf("Stored = %d, want %d", v.Stored, len(stored))
		}
		if err == nil {
			if v.Object == nil || v.Object["kind"] == "" {
				t.Fatalf("resolved to %v", v.Object)
			}
			return
		}
		var fail *secretdata.Failure
		if !errors.As(err, &fail) || !known[fail.Reason] || fail.Key != key || fail.Secret.String() != "sys/s" || v.Object != nil {
			t.Fatalf("got %v, %#v", v.Object, err)
		}
		// What the error may tell: the ref's key and the limit; not the value, nor its size.
		msg := strings.ReplaceAll(strings.ReplaceAll(err.Error(), strconv.Quote(key), ""), key, "")
		msg = strings.ReplaceAll(msg, strconv.FormatInt(content.NewBudget(limit).Limit(), 10), "")
		if len(stored) >= 24 && strings.Contains(msg, string(stored)) {
			t.Errorf("the error quotes the value: %q", err)
		}
		if n := strconv.Itoa(len(stored)); len(stored) > 99 && strings.Contains(msg, n) {
			t.Errorf("the error tells the value's size %s: %q", n, err)
		}
	})
}
