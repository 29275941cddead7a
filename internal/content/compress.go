package content

import (
	"bytes"
	"compress/gzip"
	"sync"
)

// gzipLevel is the level stored values are compressed at. See Options for the measured choice.
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
