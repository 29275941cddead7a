package content

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	kpgzip "github.com/klauspost/compress/gzip"
)

// Benchmarks on the real bundles. `go test -run '^$' -bench . -benchmem ./internal/content/`;
// docs/benchmarks/2026-11-23-content.md has the figures and what was chosen from them.

func BenchmarkPlanFor(b *testing.B) {
	benchBundles(b, func(b *testing.B, in *bundleInput) {
		var p *Plan
		for b.Loop() {
			var err error
			if p, err = PlanFor("bench", in.in, Options{}); err != nil {
				b.Fatal(err)
			}
		}
		reportPlan(b, p)
	})
}

// BenchmarkUpstreamPack is the yardstick for BenchmarkPlanFor: the work of OLM v1 operator-controller's
// SecretPacker.Pack on the same objects, in one goroutine. For each object: encoding/json Marshal,
// SHA-256 over the result, and gzip (standard library, default level) only when the JSON is over
// 900 KiB, which no object of the two bundles is. Building the Secrets is left out, as it is from
// PlanFor's figures' comparison (PlanFor's own packing is a small part of its time).
func BenchmarkUpstreamPack(b *testing.B) {
	benchBundles(b, func(b *testing.B, in *bundleInput) {
		var stored int
		for b.Loop() {
			stored = 0
			for _, o := range in.objects {
				data, err := json.Marshal(o)
				if err != nil {
					b.Fatal(err)
				}
				sum := sha256.Sum256(data)
				_ = sum
				if len(data) > upstreamCompressAbove {
					data = gzipAt(b, data, gzip.DefaultCompression)
				}
				stored += len(data)
			}
		}
		b.ReportMetric(float64(stored), "stored-B")
		b.ReportMetric(100*float64(stored)/float64(in.inline), "stored-%")
	})
}

// upstreamCompressAbove is the size over which upstream's SecretPacker gzips an object.
const upstreamCompressAbove = 900 * 1024

// BenchmarkPolicy plans the bundles at several compression thresholds (-1: only what the budget forces).
func BenchmarkPolicy(b *testing.B) {
	for _, bd := range bundles {
		for _, above := range []int{-1, 65536, 16384, 4096, 1024, 512, 256, 1} {
			b.Run(fmt.Sprintf("%s/above=%d", bd.name, above), func(b *testing.B) {
				in := loadBundle(b, bd.name, bd.namespace)
				b.SetBytes(in.inline)
				var p *Plan
				for b.Loop() {
					var err error
					if p, err = PlanFor("bench", in.in, Options{CompressAbove: above}); err != nil {
						b.Fatal(err)
					}
				}
				reportPlan(b, p)
			})
		}
	}
}

// benchBundles runs bench as a sub-benchmark of each bundle, given its objects loaded, with the
// throughput counted in their inline bytes and allocations reported.
func benchBundles(b *testing.B, bench func(b *testing.B, in *bundleInput)) {
	for _, bd := range bundles {
		b.Run(bd.name, func(b *testing.B) {
			in := loadBundle(b, bd.name, bd.namespace)
			b.SetBytes(in.inline)
			b.ReportAllocs()
			bench(b, in)
		})
	}
}

// reportPlan adds the size figures of a plan to a benchmark's output.
func reportPlan(b *testing.B, p *Plan) {
	b.ReportMetric(float64(p.Stats.Secrets), "secrets")
	b.ReportMetric(float64(p.Stats.Compressed), "gzipped")
	b.ReportMetric(float64(p.Stats.StoredBytes), "stored-B")
	b.ReportMetric(100*float64(p.Stats.StoredBytes)/float64(p.Stats.InlineBytes), "stored-%")
}

func BenchmarkCanonical(b *testing.B) {
	benchBundles(b, func(b *testing.B, in *bundleInput) {
		for b.Loop() {
			for _, o := range in.objects {
				if _, err := Canonical(o); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkResolve reads back every entry of a bundle's plan, as the reconciler does.
func BenchmarkResolve(b *testing.B) {
	benchBundles(b, func(b *testing.B, in *bundleInput) {
		p, err := PlanFor("bench", in.in, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			for _, s := range p.Secrets {
				for k, v := range s.Data {
					if _, err := Resolve(v, k, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}

// gzipper is the part of a gzip writer the comparison needs.
type gzipper interface {
	io.WriteCloser
	Reset(io.Writer)
}

// gzipLibraries are the compressors BenchmarkGzip compares: the standard library and
// github.com/klauspost/compress/gzip, which Gzip uses (figures and reasons in docs/benchmarks/2026-11-23-content.md).
var gzipLibraries = []struct {
	name   string
	levels []int
	new    func(level int) (gzipper, error)
}{
	{"std", []int{1, 4, 6, 9}, func(l int) (gzipper, error) { return gzip.NewWriterLevel(nil, l) }},
	{"klauspost", []int{1, 2, 3, 4, 5, 6, 7, 9}, func(l int) (gzipper, error) { return kpgzip.NewWriterLevel(nil, l) }},
}

// BenchmarkGzip compresses every object of a bundle on its own, as PlanFor does, with each library
// and level; stored-B is the sum of the outputs.
func BenchmarkGzip(b *testing.B) {
	for _, bd := range bundles {
		for _, lib := range gzipLibraries {
			for _, level := range lib.levels {
				b.Run(fmt.Sprintf("%s/%s-%d", bd.name, lib.name, level), func(b *testing.B) {
					in := loadBundle(b, bd.name, bd.namespace)
					plain := canonicalAll(b, in.objects)
					zw, err := lib.new(level)
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(in.inline)
					b.ReportAllocs()
					var out bytes.Buffer
					var stored int
					for b.Loop() {
						stored = 0
						for _, c := range plain {
							out.Reset()
							zw.Reset(&out)
							_, _ = zw.Write(c)
							if err := zw.Close(); err != nil {
								b.Fatal(err)
							}
							stored += out.Len()
						}
					}
					b.ReportMetric(float64(stored), "stored-B")
					b.ReportMetric(100*float64(stored)/float64(in.inline), "stored-%")
				})
			}
		}
	}
}

// BenchmarkGunzip inflates every object of a bundle compressed by Gzip, through Decode.
func BenchmarkGunzip(b *testing.B) {
	benchBundles(b, func(b *testing.B, in *bundleInput) {
		var zipped [][]byte
		for _, c := range canonicalAll(b, in.objects) {
			zipped = append(zipped, Gzip(c))
		}
		for b.Loop() {
			for _, z := range zipped {
				if _, err := Decode(z, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func canonicalAll(tb testing.TB, objs []map[string]any) [][]byte {
	out := make([][]byte, len(objs))
	for i, o := range objs {
		out[i] = mustCanonical(tb, o)
	}
	return out
}
