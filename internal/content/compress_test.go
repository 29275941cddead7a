package content

import (
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gzipInputs are inputs of every kind Gzip meets: empty, tiny, repetitive, JSON, random base64 (no
// repeated string at all), and more than one 64 KB deflate block.
func gzipInputs(tb testing.TB) map[string][]byte {
	return map[string][]byte{
		"empty":               nil,
		"one byte":            []byte("x"),
		"tiny JSON":           []byte(`{"a":1}`),
		"repetitive":          bytes.Repeat([]byte("abc"), 10_000),
		"small manifest":      mustCanonical(tb, object("ConfigMap", "ns", "c")),
		"random base64":       mustCanonical(tb, sized(4096, 1, false)),
		"large random base64": mustCanonical(tb, sized(300_000, 2, false)),
		"mixed blocks": append(mustCanonical(tb, sized(100_000, 3, true)),
			mustCanonical(tb, sized(200_000, 4, false))...),
		"generated manifests": func() []byte {
			r := rand.New(rand.NewPCG(5, 5))
			return mustCanonical(tb, map[string]any{"items": generateObjects(r, 30, 100_000)})
		}(),
	}
}

// gunzipStd reads one gzip member with the standard library, as upstream readers do, and fails on
// anything after it.
func gunzipStd(tb testing.TB, z []byte) ([]byte, gzip.Header) {
	tb.Helper()
	r := bytes.NewReader(z)
	zr, err := gzip.NewReader(r)
	if err != nil {
		tb.Fatalf("compress/gzip: %v", err)
	}
	zr.Multistream(false)
	out, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatalf("compress/gzip: %v", err)
	}
	if r.Len() != 0 {
		tb.Fatalf("%d bytes after the first gzip member", r.Len())
	}
	return out, zr.Header
}

// TestGzip checks that Gzip writes one standard gzip member with a zero header, that compress/gzip
// and Decode read back the input, and that the Huffman-only retry is kept only when it is smaller.
func TestGzip(t *testing.T) {
	for name, in := range gzipInputs(t) {
		t.Run(name, func(t *testing.T) {
			z := Gzip(in)
			if !IsGzip(z) {
				t.Fatalf("no gzip magic: % x", z[:min(len(z), 4)])
			}
			out, hdr := gunzipStd(t, z)
			if !bytes.Equal(out, in) {
				t.Errorf("compress/gzip reads %d bytes, want the %d written", len(out), len(in))
			}
			if diff := cmp.Diff(gzip.Header{OS: 255}, hdr); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
			if mtime := z[4:8]; !bytes.Equal(mtime, []byte{0, 0, 0, 0}) {
				t.Errorf("MTIME bytes % x, want zero", mtime)
			}
			if got, err := Decode(z, 0); err != nil || !bytes.Equal(got, in) {
				t.Errorf("Decode = %d bytes, %v; want the %d written", len(got), err, len(in))
			}
			level := appendGzipLevel(nil, in, gzipLevel)
			switch {
			case len(z) > len(level):
				t.Errorf("Gzip wrote %d bytes, more than the %d of level %d alone", len(z), len(level), gzipLevel)
			case len(z) < len(level) && pays(len(in), len(level)):
				t.Errorf("Huffman-only retry used although level %d saved an eighth", gzipLevel)
			}
		})
	}
}

// TestGzipHuffmanRetry checks the case the retry is for: random base64, which klauspost's fast
// levels store as it is, still shrinks by a quarter.
func TestGzipHuffmanRetry(t *testing.T) {
	for _, n := range []int{4096, 300_000} {
		in := mustCanonical(t, sized(n, 7, false))
		level, z := appendGzipLevel(nil, in, gzipLevel), Gzip(in)
		if pays(len(in), len(level)) {
			t.Errorf("%d bytes: level %d alone saves an eighth (%d bytes); the test no longer tests the retry", n, gzipLevel, len(level))
		}
		if !pays(len(in), len(z)) {
			t.Errorf("%d bytes of random base64 gzip to %d, less than an eighth saved", n, len(z))
		}
	}
}

// TestGzipDeterministic compresses every input with a new writer, then with pooled writers that
// have compressed other inputs before, from several goroutines at once: the bytes must not change.
func TestGzipDeterministic(t *testing.T) {
	inputs := gzipInputs(t)
	want := map[string][]byte{}
	for name, in := range inputs {
		want[name] = Gzip(in)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for g := range 4 {
		wg.Go(func() {
			for round := range 5 {
				for name, in := range inputs {
					if (len(name)+g+round)%3 == 0 {
						_ = Gzip(in[:len(in)/2]) // leave other state in the pooled writer
					}
					if !bytes.Equal(Gzip(in), want[name]) {
						errs <- name
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("%s: Gzip output changed between calls", name)
	}
}

// oldGzip is what the compressor before klauspost/compress (the standard library at level 6, zero
// header) stored for the canonical JSON of sized(2000, 1, true): the gzip value of TestPlanForGolden
// until then, under its key oldGzipKey.
var (
	oldGzip = []byte{0x1f, 0x8b, 0x8, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0xff, 0xaa, 0x56, 0x4a, 0x51, 0xb2, 0x52,
		0x4a, 0x1a, 0x5, 0xa3, 0x60, 0x14, 0x8c, 0x82, 0x51, 0x30, 0xa, 0x46, 0xc1, 0x90, 0x5, 0x4a, 0xb5, 0x80,
		0x0, 0x0, 0x0, 0xff, 0xff, 0x29, 0xd, 0x18, 0x9e, 0xd0, 0x7, 0x0, 0x0}
	oldGzipKey = "dxJWehq_IAaEWuYn-_Y5GXcM_TdL3QBHdujJc9oMyTo"
)

// TestDecodeStandardLibraryGzip checks that values written by the earlier compressor, the standard
// library, still resolve: the stored golden value, and every input compressed at the levels the
// standard library was measured at.
func TestDecodeStandardLibraryGzip(t *testing.T) {
	t.Run("stored golden value", func(t *testing.T) {
		if got := Key(oldGzip); got != oldGzipKey {
			t.Fatalf("the old value hashes to %s, want %s: not the bytes that were stored", got, oldGzipKey)
		}
		got, err := Resolve(oldGzip, oldGzipKey, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(sized(2000, 1, true), got); diff != "" {
			t.Errorf("Resolve (-want +got):\n%s", diff)
		}
		if bytes.Equal(Gzip(mustCanonical(t, got)), oldGzip) {
			t.Errorf("Gzip writes the old bytes: the test no longer tests old values")
		}
	})
	for name, in := range gzipInputs(t) {
		for _, level := range []int{gzip.BestSpeed, 4, gzip.DefaultCompression, gzip.BestCompression} {
			z := gzipAt(t, in, level)
			if got, err := Decode(z, 0); err != nil || !bytes.Equal(got, in) {
				t.Errorf("%s, standard library level %d: Decode = %d bytes, %v; want the %d written", name, level, len(got), err, len(in))
			}
		}
	}
}

// FuzzGzip compresses arbitrary bytes: compress/gzip must read back exactly one member holding them,
// and a second compression must give the same bytes.
func FuzzGzip(f *testing.F) {
	for _, in := range gzipInputs(f) {
		if len(in) < 10_000 {
			f.Add(in)
		}
	}
	f.Add([]byte(strings.Repeat("description: ", 100)))
	f.Fuzz(func(t *testing.T, in []byte) {
		z := Gzip(in)
		if out, _ := gunzipStd(t, z); !bytes.Equal(out, in) {
			t.Fatalf("compress/gzip reads %d bytes, want the %d written", len(out), len(in))
		}
		if again := Gzip(in); !bytes.Equal(again, z) {
			t.Fatalf("second Gzip differs: %d bytes, then %d", len(z), len(again))
		}
		if level := appendGzipLevel(nil, in, gzipLevel); len(z) > len(level) {
			t.Fatalf("Gzip wrote %d bytes, more than the %d of level %d alone", len(z), len(level), gzipLevel)
		}
	})
}
