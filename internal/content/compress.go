package content

import (
	"bytes"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
)

// gzipLevel is the level stored values are compressed at, with github.com/klauspost/compress/gzip
// (docs/benchmarks/2026-11-23-content.md has the measurements). Level 4 stores the prometheus-operator CRDs in
// 13.6% of their inline size at ~285 MB/s, 4-5x the speed of the standard library at level 6 (12.2%,
// 60-75 MB/s); klauspost's levels 5 (12.9%) and 6 (12.6%) take 15% and 30% more time, which PlanFor
// on one core cannot spare if it is to be as fast as upstream's json.Marshal and SHA-256 of every
// object; levels 1-3 store 14.1-15.8%, at or over the 15% target.
//
// The standard library was used before, for stable output: content keys hash the stored, compressed
// bytes, and a dry-run of an unchanged ClusterObjectSet had to get exactly the refs of the stored one.
// That need went away when the webhook started comparing refs by resolved (decoded) content: a
// re-apply whose refs hold the same objects is a no-op whatever bytes the compressor writes. Output is
// still deterministic within a version of klauspost/compress (same input, same bytes, same keys, on any
// number of cores; TestPlanForGolden pins it) and keys still hash the stored bytes, but an upgrade of
// the library may change the keys of Secrets written after it. Secrets already written keep theirs,
// and readers take any gzip: Decode reads what the standard library wrote (TestDecodeStandardLibraryGzip),
// and what is written here is one standard gzip member that compress/gzip reads, as upstream does.
const gzipLevel = 4

// gzipWriters recycles writers, one pool per level: a deflate compressor holds hundreds of KB of
// tables, far more than most objects. A reused writer writes the same bytes as a new one
// (TestGzipDeterministic).
var gzipWriters = map[int]*sync.Pool{gzipLevel: gzipPool(gzipLevel), gzip.HuffmanOnly: gzipPool(gzip.HuffmanOnly)}

func gzipPool(level int) *sync.Pool {
	return &sync.Pool{New: func() any {
		w, err := gzip.NewWriterLevel(nil, level)
		if err != nil {
			panic(err) // level is a valid constant
		}
		return w
	}}
}

// gzipEpoch is the modification time written in every header: 0, "no time stamp" (RFC 1952).
// klauspost's writer, unlike the standard library's, writes the zero time.Time as a non-zero value.
var gzipEpoch = time.Unix(0, 0)

// Gzip returns the gzip compression of src as PlanFor stores it: a single standard gzip member with a
// zero header (no name, no modification time), readable by compress/gzip; equal input always gives
// equal bytes with a given version of github.com/klauspost/compress.
//
// klauspost's levels 1-6 store a 64 KB block that has no repeated string as it is, where the standard
// library still Huffman-codes it: random base64 of 64 symbols, as in a large embedded certificate or
// binary blob, stays at 100% instead of ~75%. So when src does not shrink by an eighth at gzipLevel,
// it is compressed again with Huffman coding alone (fast: no match search), and the smaller of the
// two is kept.
func Gzip(src []byte) []byte {
	buf := compressedBuffers.Get().(*[]byte)
	defer compressedBuffers.Put(buf)
	*buf = appendGzip((*buf)[:0], src)
	return bytes.Clone(*buf) // exact size: the result is kept in a plan
}

// appendGzip appends Gzip(src) to dst.
func appendGzip(dst, src []byte) []byte {
	start := len(dst)
	dst = appendGzipLevel(dst, src, gzipLevel)
	if n := len(dst) - start; !pays(len(src), n) {
		dst = appendGzipLevel(dst, src, gzip.HuffmanOnly)
		if huff := len(dst) - start - n; huff < n {
			dst = append(dst[:start], dst[start+n:]...)
		} else {
			dst = dst[:start+n]
		}
	}
	return dst
}

// appendGzipLevel appends the gzip compression of src at a level to dst.
func appendGzipLevel(dst, src []byte, level int) []byte {
	out := appender{b: dst}
	pool := gzipWriters[level]
	zw := pool.Get().(*gzip.Writer)
	defer pool.Put(zw)
	zw.Reset(&out)
	zw.ModTime = gzipEpoch
	// Writes to an appender cannot fail, and Reset cleared any earlier error.
	_, _ = zw.Write(src)
	_ = zw.Close()
	return out.b
}

// appender is an io.Writer that appends to a byte slice.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// compressedBuffers recycles the buffers compressed output is first written to.
var compressedBuffers = sync.Pool{New: func() any { return new([]byte) }}
