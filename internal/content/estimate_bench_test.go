package content

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// estimateShapes are the parts of a value whose heap heapEstimate's constants bound, each as the
// element of an array of shapeCount of them in an object: {"a":[<shape>,<shape>,...]}.
var estimateShapes = []struct{ name, elem string }{
	{"null", `null`},
	{"true", `true`},
	{"int-small", `7`},
	{"int", `1000`},
	{"float", `1.5`},
	{"string-empty", `""`},
	{"string-1", `"x"`},
	{"string-8", `"xxxxxxxx"`},
	{"string-9", `"xxxxxxxxx"`},
	{"string-33", `"` + strings.Repeat("x", 33) + `"`},
	{"string-escaped", `"a\nb"`},
	{"string-not-utf8", "\"\xff\xff\xff\xff\""},
	{"object-empty", `{}`},
	{"object-1", `{"k":null}`},
	{"object-8", `{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0}`},
	{"object-9", `{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0}`},
	{"object-14", `{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0,"k":0,"l":0,"m":0,"n":0}`},
	{"object-15", `{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0,"k":0,"l":0,"m":0,"n":0,"o":0}`},
	{"object-50", manyMembers(50)},
	{"array-empty", `[]`},
	{"array-1", `[null]`},
	{"array-3", `[null,null,null]`},
	{"array-5", `[null,null,null,null,null]`},
	{"array-100", "[" + strings.TrimSuffix(strings.Repeat("null,", 100), ",") + "]"},
	{"array-1000", "[" + strings.TrimSuffix(strings.Repeat("null,", 1000), ",") + "]"},
}

// shapeCount is how many of a shape one measured value holds.
const shapeCount = 10_000

// manyMembers is an object of n members with 1- or 2-byte keys (a 1-byte string takes no heap).
func manyMembers(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"%c%c":0`, 'a'+i/26, 'a'+i%26)
	}
	b.WriteString("}")
	return b.String()
}

// shapeValue is the value of shapeCount elements of one shape.
func shapeValue(elem string, count int) []byte {
	return []byte(`{"a":[` + strings.TrimSuffix(strings.Repeat(elem+",", count), ",") + `]}`)
}

// BenchmarkHeapEstimate measures what parsing keeps (retained-B: the live heap after a collection,
// with the object held) against heapEstimate, for each shape of estimateShapes and for every object
// of the real bundles; B/op is all that parsing allocates, garbage included. Per-shape figures are
// per element, the array's own share included: the constants of estimate.go are the differences
// between shapes (object-empty minus null is an empty map's). estimate/retained must stay >= 1.
// `go test -run '^$' -bench HeapEstimate -benchmem ./internal/content/`; figures in docs/benchmarks/.
func BenchmarkHeapEstimate(b *testing.B) {
	for _, s := range estimateShapes {
		data := shapeValue(s.elem, shapeCount)
		b.Run("shape="+s.name, func(b *testing.B) {
			benchmarkEstimate(b, [][]byte{data}, shapeCount)
		})
	}
	for _, bd := range bundles {
		b.Run("bundle="+bd.name, func(b *testing.B) {
			benchmarkEstimate(b, canonicalAll(b, loadBundle(b, bd.name, bd.namespace).objects), 0)
		})
	}
}

// benchmarkEstimate parses values in every iteration and reports the estimate and the heap retained,
// per element when per > 0, and their ratio.
func benchmarkEstimate(b *testing.B, values [][]byte, per int) {
	var size, estimate int64
	for _, v := range values {
		e, err := heapEstimate(v)
		if err != nil {
			b.Fatal(err)
		}
		estimate += e
		size += int64(len(v))
	}
	retained := retainedHeap(b, values)
	eachLoop(b, size, values, parseObject)
	div := float64(max(per, 1))
	b.ReportMetric(float64(retained)/div, "retained-B")
	b.ReportMetric(float64(estimate)/div, "estimate-B")
	b.ReportMetric(float64(estimate)/float64(retained), "estimate/retained")
	b.ReportMetric(float64(estimate)/float64(size), "estimate/json")
}

// retainedHeap is the growth of the live heap over a collection while the objects parsed from values
// are held, the least of three runs (other goroutines may allocate meanwhile).
func retainedHeap(b *testing.B, values [][]byte) int64 {
	var least int64 = -1
	for range 3 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		before := m.HeapAlloc
		objs := make([]map[string]any, len(values))
		for i, v := range values {
			var err error
			if objs[i], err = parseObject(v); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m)
		// The slice of objects is not the parser's.
		got := int64(m.HeapAlloc) - int64(before) - allocSize(int64(8*len(values)))
		runtime.KeepAlive(objs)
		if least < 0 || got < least {
			least = got
		}
	}
	return least
}

// BenchmarkScan is the speed of heapEstimate alone on the real bundles, for comparison with parsing
// them (BenchmarkHeapEstimate's bundle= lines).
func BenchmarkScan(b *testing.B) {
	for _, bd := range bundles {
		b.Run(bd.name, func(b *testing.B) {
			values := canonicalAll(b, loadBundle(b, bd.name, bd.namespace).objects)
			var size int64
			for _, v := range values {
				size += int64(len(v))
			}
			eachLoop(b, size, values, heapEstimate)
		})
	}
}

// eachLoop is the benchmark loop of f over every value, size bytes in all.
func eachLoop[T any](b *testing.B, size int64, values [][]byte, f func([]byte) (T, error)) {
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, v := range values {
			if _, err := f(v); err != nil {
				b.Fatal(err)
			}
		}
	}
}
