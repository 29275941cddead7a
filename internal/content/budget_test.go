package content

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// bombJSON is the size of the object in the test bomb: just under MaxDecompressedSize, so that one
// value alone is allowed and only the total can stop many refs to it.
const bombJSON = MaxDecompressedSize - 1024

var (
	bombOnce   sync.Once
	bombStored []byte
)

// bomb returns a gzip-compressed ConfigMap of bombJSON bytes (about 10 KB stored), and its size.
func bomb(tb testing.TB) ([]byte, int64) {
	tb.Helper()
	bombOnce.Do(func() { bombStored = gzipBest(tb, sizedObject(bombJSON)) })
	return bombStored, bombJSON
}

// sizedObject is a ConfigMap of exactly n bytes of JSON (n >= 100): one long string of one letter.
func sizedObject(n int) []byte {
	head := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bomb"},"data":{"x":"`
	tail := `"}}`
	return []byte(head + strings.Repeat("a", n-len(head)-len(tail)) + tail)
}

// containerBombs returns n different values of about 10 KB of gzip (best compression) that inflate
// to a ConfigMap of just under MaxDecompressedSize bytes of JSON: 3.5 million empty objects in an
// array, as `"data":[{},{},...]`.
func containerBombs(tb testing.TB, n int) [][]byte {
	tb.Helper()
	out := make([][]byte, n)
	for i := range out {
		head := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bomb-%d"},"data":[`, i)
		count := (MaxDecompressedSize - 1024 - len(head)) / 3
		out[i] = gzipBest(tb, []byte(head+strings.Repeat("{},", count)+"{}]}"))
	}
	return out
}

// costOf is what a Budget charges for each use of a stored value that resolves: the larger of its
// decoded size and its heap estimate.
func costOf(tb testing.TB, stored []byte) int64 {
	tb.Helper()
	data, err := Decode(stored, 0)
	if err != nil {
		tb.Fatal(err)
	}
	est, err := heapEstimate(data)
	if err != nil {
		tb.Fatal(err)
	}
	return max(int64(len(data)), est)
}

// gzipBest compresses at the best ratio, as a bomb maker would.
func gzipBest(tb testing.TB, b []byte) []byte { return gzipAt(tb, b, gzip.BestCompression) }

// use is one ref resolved through a Budget, and what it should give.
type use struct {
	id      string
	stored  []byte
	key     string
	times   int   // how many refs in a row (0 means 1)
	ok      int   // how many of them resolve; the rest fail with wantErr (times when wantErr is nil)
	wantErr error // the error of the others
}

func TestBudget(t *testing.T) {
	small := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"` + secretMarker + `"}}`)
	n := costOf(t, small)
	other := bytes.Replace(small, []byte(`"a"`), []byte(`"b"`), 1) // the same size
	zipped := Gzip(small)
	bombed, _ := bomb(t)
	bombSize := costOf(t, bombed)
	tooBig := Gzip(sizedObject(MaxDecompressedSize + 1))
	corrupt := bytes.Clone(zipped)
	corrupt[len(corrupt)-8] ^= 0xff // CRC
	tampered := bytes.Replace(small, []byte(secretMarker), []byte("hunter3-do-not-leak"), 1)

	tests := map[string]struct {
		limit    int64
		uses     []use
		wantUsed int64
	}{
		"under the limit": {3 * n, []use{
			{id: "ns/s/a", stored: small, key: Key(small), ok: 1},
			{id: "ns/s/b", stored: other, key: "b", ok: 1},
		}, 2 * n},
		"exactly at the limit": {2 * n, []use{
			{id: "ns/s/a", stored: small, key: Key(small), ok: 1},
			{id: "ns/s/b", stored: other, key: "b", ok: 1},
		}, 2 * n},
		"over the limit by one byte": {2*n - 1, []use{
			{id: "ns/s/a", stored: small, key: Key(small), ok: 1},
			{id: "ns/s/b", stored: other, key: "b", wantErr: ErrBudgetExceeded},
		}, n},
		"the gzip form is charged as the plain one": {n, []use{
			{id: "ns/s/z", stored: zipped, key: Key(zipped), times: 2, ok: 1, wantErr: ErrBudgetExceeded},
		}, n},
		"many refs to one key": {100 * n, []use{
			{id: "ns/s/a", stored: small, key: Key(small), times: 150, ok: 100, wantErr: ErrBudgetExceeded},
		}, 100 * n},
		"full, then a new value": {n, []use{
			{id: "ns/s/a", stored: small, key: Key(small), ok: 1},
			{id: "ns/s/b", stored: other, key: "b", times: 3, wantErr: ErrBudgetExceeded},
			{id: "ns/s/z", stored: zipped, key: Key(zipped), wantErr: ErrBudgetExceeded},
		}, n},
		"a thousand refs to one bomb": {DefaultMaxResolvedBytes, []use{
			{id: "sys/bomb/k", stored: bombed, key: Key(bombed), times: 1000, ok: 6, wantErr: ErrBudgetExceeded},
		}, 6 * bombSize},
		"a bomb larger than what is left": {5 << 20, []use{
			{id: "sys/bomb/k", stored: bombed, key: Key(bombed), times: 3, wantErr: ErrBudgetExceeded},
			{id: "ns/s/a", stored: small, key: Key(small), ok: 1},
		}, n},
		"a bomb inflating past the per-value limit": {DefaultMaxResolvedBytes, []use{
			{id: "sys/big/k", stored: tooBig, key: Key(tooBig), times: 2, wantErr: ErrTooLarge},
			{id: "ns/s/a", stored: small, key: Key(small), ok: 1},
		}, n},
		"corrupt gzip": {DefaultMaxResolvedBytes, []use{
			{id: "ns/s/c", stored: corrupt, key: "c", times: 2, wantErr: ErrCorrupt},
			{id: "ns/s/a", stored: small, key: Key(small), ok: 1},
		}, n},
		"not JSON": {DefaultMaxResolvedBytes, []use{
			{id: "ns/s/j", stored: []byte(secretMarker), key: "j", wantErr: ErrCorrupt},
		}, 0},
		"digest mismatch": {DefaultMaxResolvedBytes, []use{
			{id: "ns/s/t", stored: tampered, key: Key(small), times: 2, wantErr: ErrDigestMismatch},
		}, 0},
		"a zero limit is the default": {0, []use{
			{id: "sys/bomb/k", stored: bombed, key: Key(bombed), times: 7, ok: 6, wantErr: ErrBudgetExceeded},
		}, 6 * bombSize},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := NewBudget(tc.limit)
			first := map[string]map[string]any{}
			for i, u := range tc.uses {
				times := max(u.times, 1)
				ok := u.ok
				if u.wantErr == nil {
					ok = times
				}
				for k := range times {
					obj, err := b.Resolve(context.Background(), u.id, u.stored, u.key)
					if k < ok {
						if err != nil {
							t.Fatalf("use %d, ref %d: %v", i, k, err)
						}
						if prev, seen := first[u.id]; seen && reflect.ValueOf(prev).Pointer() != reflect.ValueOf(obj).Pointer() {
							t.Fatalf("use %d, ref %d: %s decoded again", i, k, u.id)
						}
						first[u.id] = obj
						continue
					}
					if !errors.Is(err, u.wantErr) || obj != nil {
						t.Fatalf("use %d, ref %d: got %v and an object %v, want %v", i, k, err, obj != nil, u.wantErr)
					}
					if u.wantErr != ErrBudgetExceeded && errors.Is(err, ErrBudgetExceeded) {
						t.Fatalf("use %d, ref %d: %v is a budget error", i, k, err)
					}
					if msg := err.Error(); strings.Contains(msg, secretMarker) || strings.Contains(msg, "hunter3") || strings.Contains(msg, "aaaa") {
						t.Fatalf("error contains content: %v", err)
					}
				}
				if b.Used() > b.Limit() {
					t.Fatalf("used %d past the limit %d", b.Used(), b.Limit())
				}
			}
			if b.Used() != tc.wantUsed {
				t.Errorf("Used = %d, want %d", b.Used(), tc.wantUsed)
			}
		})
	}
}

func TestBudgetErrors(t *testing.T) {
	ctx := context.Background()
	obj := []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`) // 38 bytes
	cost := costOf(t, obj)
	var be *BudgetError
	_, err := NewBudget(10).Resolve(ctx, "x", obj, "k")
	if !errors.As(err, &be) || *be != (BudgetError{Limit: 10}) || !errors.Is(err, ErrBudgetExceeded) || !errors.Is(err, ErrTooLarge) {
		t.Errorf("error %#v, want a BudgetError of limit 10 that is ErrBudgetExceeded and ErrTooLarge", err)
	}
	if want := "the resolved content exceeds the limit of 10 bytes"; err == nil || err.Error() != want {
		t.Errorf("error %v, want it to say %q", err, want)
	}
	// 38 bytes fit in 50, but not the heap its object keeps.
	_, err = NewBudget(50).Resolve(ctx, "x", obj, "k")
	if !errors.As(err, &be) || *be != (BudgetError{Limit: 50, Need: cost}) {
		t.Errorf("error %#v, want a BudgetError of %d needed", err, cost)
	}
	b := NewBudget(cost + 50)
	if _, err := b.Resolve(ctx, "y", obj, "k"); err != nil {
		t.Fatal(err)
	}
	_, err = b.Resolve(ctx, "y", obj, "k")
	if !errors.As(err, &be) || *be != (BudgetError{Limit: cost + 50, Used: cost, Need: cost}) {
		t.Errorf("error %#v, want a BudgetError of %d used, %d needed", err, cost, cost)
	}
	// The message names the limit alone: what was used and what the value needs are costs of values
	// read from Secrets.
	if want := fmt.Sprintf("the resolved content exceeds the limit of %d bytes", cost+50); err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if NewBudget(-1).Limit() != DefaultMaxResolvedBytes {
		t.Error("a negative limit is not the default")
	}
}

// TestBudgetDecodesOnce checks that later refs to a value neither read nor decode it again: they
// allocate nothing.
func TestBudgetDecodesOnce(t *testing.T) {
	stored := Gzip(sizedObject(100_000))
	key := Key(stored)
	b := NewBudget(1 << 40)
	ctx := context.Background()
	if _, err := b.Resolve(ctx, "ns/s/k", stored, key); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := b.Resolve(ctx, "ns/s/k", stored, key); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a memoized ref allocates %.0f times", allocs)
	}
	if want := 102 * costOf(t, stored); b.Used() != want {
		t.Errorf("Used = %d, want %d", b.Used(), want)
	}
}

// FuzzBudget resolves a sequence of refs to arbitrary values under an arbitrary limit: it must never
// panic, never charge past the limit, charge exactly the cost (costOf) of each successful use, give the
// same object for every use of one id, and fail only with the package's errors.
func FuzzBudget(f *testing.F) {
	seeds := decodeSeeds(f)
	f.Add(seeds[0], seeds[1], seeds[3], uint32(1000), []byte{0, 1, 0, 2, 1, 1, 0})
	f.Add(seeds[1], Gzip(sizedObject(50_000)), []byte("null"), uint32(120_000), []byte{1, 1, 1, 1, 0, 2})
	f.Add(gzipBest(f, sizedObject(1<<20)), seeds[4], seeds[12], uint32(3<<20), []byte{0, 0, 0, 0, 1, 2})
	f.Add(seeds[0], seeds[0], seeds[0], uint32(0), []byte{0, 1, 2, 0, 1, 2})
	f.Fuzz(func(t *testing.T, v0, v1, v2 []byte, limit uint32, order []byte) {
		values := [][]byte{v0, v1, v2}
		b := NewBudget(int64(limit))
		seen := map[int]map[string]any{}
		var charged int64
		for i, o := range order {
			v := int(o) % len(values)
			// Odd ids use content keys, so digests are checked; even ones plain keys.
			key := fmt.Sprintf("k%d", v)
			if o%2 == 1 {
				key = Key(values[v])
			}
			id := fmt.Sprintf("ns/s/%d/%d", v, o%2)
			before := b.Used()
			obj, err := b.Resolve(context.Background(), id, values[v], key)
			if b.Used() > b.Limit() {
				t.Fatalf("use %d: charged %d past the limit %d", i, b.Used(), b.Limit())
			}
			if err != nil {
				if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrDigestMismatch) {
					t.Fatalf("use %d: error %v is none of the package's errors", i, err)
				}
				if b.Used() != before {
					t.Fatalf("use %d: a failed use charged %d bytes", i, b.Used()-before)
				}
				continue
			}
			cost := costOf(t, values[v])
			if b.Used()-before != cost {
				t.Fatalf("use %d: charged %d bytes for a value of %d", i, b.Used()-before, cost)
			}
			charged += cost
			if prev, ok := seen[v*2+int(o%2)]; ok && reflect.ValueOf(prev).Pointer() != reflect.ValueOf(obj).Pointer() {
				t.Fatalf("use %d: decoded again", i)
			}
			seen[v*2+int(o%2)] = obj
		}
		if charged != b.Used() {
			t.Fatalf("charged %d, Used %d", charged, b.Used())
		}
	})
}
