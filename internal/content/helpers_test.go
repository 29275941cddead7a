package content

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
)

// The real bundles (builders.BundleDir: bin/testdata/bundles from `make testdata`, or $COS_TESTDATA_DIR),
// and the namespace their namespaced objects go to. Tests read their excerpts (builders.Excerpt),
// benchmarks the bundles themselves.
var bundles = []struct{ name, namespace string }{
	{"prometheus-operator-crds", ""},
	{"argocd-install", "argocd"},
}

// bundleInput is a bundle as PlanFor sees it: its objects in the producer phases.
type bundleInput struct {
	in      Input
	objects []map[string]any // every object, in phase order
	inline  int64            // sum of canonical JSON sizes
}

var (
	bundleMu    sync.Mutex
	bundleCache = map[string]*bundleInput{}
)

// loadBundle reads a real bundle into phases, once per test binary, for benchmarks: they skip
// without the bundles (`make testdata`).
func loadBundle(b *testing.B, name, namespace string) *bundleInput {
	b.Helper()
	if _, err := builders.BundleDir(name); err != nil {
		b.Skip(err)
	}
	return load(b, "bundle "+name, func() (*olmv1.ClusterObjectSet, error) { return builders.Bundle("bundle", name, namespace) })
}

// loadExcerpt reads the excerpt of a real bundle kept in the repository into phases, for tests.
func loadExcerpt(tb testing.TB, name, namespace string) *bundleInput {
	tb.Helper()
	return load(tb, "excerpt "+name, func() (*olmv1.ClusterObjectSet, error) { return builders.Excerpt("bundle", name, namespace) })
}

func load(tb testing.TB, what string, read func() (*olmv1.ClusterObjectSet, error)) *bundleInput {
	tb.Helper()
	bundleMu.Lock()
	defer bundleMu.Unlock()
	if b, ok := bundleCache[what]; ok {
		return b
	}
	cos, err := read()
	if err != nil {
		tb.Fatalf("load %s: %v", what, err)
	}
	b := &bundleInput{}
	for _, ph := range cos.Spec.Phases {
		pi := PhaseInput{Name: ph.Name}
		for _, o := range ph.Objects {
			pi.Objects = append(pi.Objects, ObjectInput{Object: o.Object.Object})
			b.objects = append(b.objects, o.Object.Object)
			c, err := Canonical(o.Object.Object)
			if err != nil {
				tb.Fatal(err)
			}
			b.inline += int64(len(c))
		}
		b.in.Phases = append(b.in.Phases, pi)
	}
	bundleCache[what] = b
	return b
}

// sized returns an object whose canonical JSON is exactly n bytes (n >= 8): {"d":"<n-8 chars>"}, the
// chars made from seed. compressible chooses a repeated char over pseudo-random base64url ones.
func sized(n int, seed uint64, compressible bool) map[string]any {
	if compressible {
		return map[string]any{"d": strings.Repeat(string(rune('a'+seed%26)), n-8)}
	}
	r := rand.New(rand.NewPCG(seed, seed))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := make([]byte, n-8)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return map[string]any{"d": string(b)}
}

// object returns a minimal manifest.
func object(kind, namespace, name string) map[string]any {
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	return map[string]any{"apiVersion": "v1", "kind": kind, "metadata": md}
}

// phases builds an Input of one phase per argument.
func phases(objs ...[]ObjectInput) Input {
	var in Input
	for i, o := range objs {
		in.Phases = append(in.Phases, PhaseInput{Name: fmt.Sprintf("p%d", i), Objects: o})
	}
	return in
}

// inline wraps objects as inline phase members.
func inline(objs ...map[string]any) []ObjectInput {
	out := make([]ObjectInput, len(objs))
	for i, o := range objs {
		out[i] = ObjectInput{Object: o}
	}
	return out
}

// gz compresses b fast: any valid gzip will do for reader tests.
func gz(tb testing.TB, b []byte) []byte { return gzipAt(tb, b, gzip.BestSpeed) }

// gzipAt compresses b at a gzip level.
func gzipAt(tb testing.TB, b []byte, level int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, level)
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// mustCanonical is Canonical for objects known to be valid.
func mustCanonical(tb testing.TB, obj map[string]any) []byte {
	tb.Helper()
	c, err := Canonical(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
