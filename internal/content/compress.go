package content

import (
	"bytes"
	"compress/gzip"
	"sync"
)

// gzipLevel is the level stored values are compressed at: the standard library's default (6). On the
// real bundles (docs/benchmarks-content.md) it stores the prometheus-operator CRDs in 12.2% of their
// inline size at ~75 MB/s, against 13.0% at level 4 (~140 MB/s) and 12.1% at level 9 (~57 MB/s);
// github.com/klauspost/compress was 2.7x faster at level 6 but 3% larger. Speed hardly matters here
// (tens of milliseconds for a 2.8 MB bundle, against a 10 s webhook timeout and the API calls that
// follow); stable output does: content keys hash the compressed bytes, so a compressor that changed
// its output would change the refs a dry-run of an unchanged ClusterObjectSet gets. The standard
// library changes only with the Go toolchain the project pins, and TestPlanForGolden catches it.
const gzipLevel = gzip.DefaultCompression

// gzipWriters recycles writers: a deflate compressor is ~1 MB of state, far more than most objects.
var gzipWriters = sync.Pool{New: func() any {
	w, err := gzip.NewWriterLevel(nil, gzipLevel)
	if err != nil {
		panic(err) // gzipLevel is a valid constant
	}
	return w
}}

// Gzip returns the gzip compression of src as PlanFor stores it: a single member with a zero header
// (no name, no modification time), so equal input always gives equal bytes with a given Go release.
func Gzip(src []byte) []byte {
	buf := scratch.Get().(*bytes.Buffer)
	defer scratch.Put(buf)
	buf.Reset()
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(buf)
	// Writes to a bytes.Buffer cannot fail, and Reset cleared any earlier error.
	_, _ = zw.Write(src)
	_ = zw.Close()
	return bytes.Clone(buf.Bytes()) // exact size: the result is kept in a plan
}

// scratch recycles the buffers compressed output is first written to.
var scratch = sync.Pool{New: func() any { return new(bytes.Buffer) }}
