package content

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// bombRefs is how many refs to one bomb the benchmark resolves: the example.
const bombRefs = 1000

// BenchmarkBudgetBomb resolves 1000 refs to one gzip bomb of about 10 KB that inflates to just under
// 10 MiB (each value alone is within MaxDecompressedSize), under the default budget of 64 MiB: six
// refs resolve, the others fail with ErrBudgetExceeded. B/op is what one whole ClusterObjectSet
// costs; peak-heap-B is the largest heap growth seen after any ref of one such resolution, with
// every resolved object still held. Without the budget, every ref would inflate its own copy: the
// one-ref case shows the cost of a single ref, to be multiplied by 1000.
// `go test -run '^$' -bench BudgetBomb -benchmem ./internal/content/`; figures in docs/benchmarks/.
func BenchmarkBudgetBomb(b *testing.B) {
	stored, size := bomb(b)
	key := Key(stored)
	b.Run("budget/1000-refs", func(b *testing.B) {
		var resolved int
		b.ReportAllocs()
		for b.Loop() {
			resolved = len(resolveRefs(b, stored, key, nil))
		}
		b.ReportMetric(float64(len(stored)), "stored-B")
		b.ReportMetric(float64(size), "inflated-B")
		b.ReportMetric(float64(resolved), "resolved-refs")
		b.ReportMetric(float64(peakHeap(func(sample func()) { resolveRefs(b, stored, key, sample) })), "peak-heap-B")
	})
	b.Run("no-budget/1-ref", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Resolve(stored, key, MaxDecompressedSize); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(peakHeap(func(sample func()) {
			obj, err := Resolve(stored, key, MaxDecompressedSize)
			if err != nil {
				b.Fatal(err)
			}
			sample()
			runtime.KeepAlive(obj)
		})), "peak-heap-B")
	})
}

// resolveRefs resolves bombRefs refs to one value through a fresh default Budget, calling sample
// (when given) after each, and returns the objects resolved.
func resolveRefs(b *testing.B, stored []byte, key string, sample func()) []map[string]any {
	budget := NewBudget(DefaultMaxResolvedBytes)
	id := "olmv1-system/bomb/" + key
	var out []map[string]any
	for range bombRefs {
		obj, err := budget.Resolve(context.Background(), id, stored, key)
		switch {
		case err == nil:
			out = append(out, obj)
		case !isBudgetError(err):
			b.Fatal(err)
		}
		if sample != nil {
			sample()
		}
	}
	return out
}

// BenchmarkContainerBomb resolves six values of about 10 KB of gzip each that inflate to just under
// 10 MiB of `{"data":[{},{},...]}` (3.5 million empty objects, each 3 bytes of JSON and 80 bytes of
// heap parsed), through one default Budget: each is inflated and scanned, and refused before it is
// parsed. peak-heap-B is the largest heap growth sampled after each value; no-budget/1-value parses
// one of them (content.Resolve), as the Budget did before it estimated.
// `go test -run '^$' -bench ContainerBomb -benchmem ./internal/content/`; figures in docs/benchmarks/.
func BenchmarkContainerBomb(b *testing.B) {
	values := containerBombs(b, 6)
	b.Run("budget/6-values", func(b *testing.B) {
		b.ReportAllocs()
		resolve := func(sample func()) {
			budget := NewBudget(DefaultMaxResolvedBytes)
			for i, v := range values {
				if _, err := budget.Resolve(context.Background(), fmt.Sprint(i), v, Key(v)); !isBudgetError(err) {
					b.Fatalf("value %d: %v, want a budget error", i, err)
				}
				if sample != nil {
					sample()
				}
			}
		}
		for b.Loop() {
			resolve(nil)
		}
		b.ReportMetric(float64(len(values[0])), "stored-B")
		b.ReportMetric(float64(peakHeap(resolve)), "peak-heap-B")
	})
	b.Run("no-budget/1-value", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Resolve(values[0], Key(values[0]), MaxDecompressedSize); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(peakHeap(func(sample func()) {
			obj, err := Resolve(values[0], Key(values[0]), MaxDecompressedSize)
			if err != nil {
				b.Fatal(err)
			}
			sample()
			runtime.KeepAlive(obj)
		})), "peak-heap-B")
	})
}

func isBudgetError(err error) bool { return errors.Is(err, ErrBudgetExceeded) }

// peakHeap runs f once after a collection and returns the largest growth of the heap (live objects
// and garbage not yet collected) over the starting point among the samples f takes.
func peakHeap(f func(sample func())) uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	base, peak := m.HeapAlloc, m.HeapAlloc
	f(func() {
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapAlloc)
	})
	return peak - base
}
