package content

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// FuzzPlanResolve packs generated objects of varied sizes, kinds of content and duplicates, under
// varied budgets and thresholds, and checks that every ref resolves to its object and that every
// Secret stays within the budget; a failure must be a TooLargeError for an object that really does not
// fit. doc, when it is a JSON object, is packed too.
func FuzzPlanResolve(f *testing.F) {
	f.Add(uint64(1), uint8(5), uint16(2000), int16(0), []byte(`{"kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"<b>&"}}`))
	f.Add(uint64(2), uint8(23), uint16(65535), int16(-1), []byte(`{}`))
	f.Add(uint64(3), uint8(20), uint16(300), int16(1), []byte(`{"n":1.0,"m":[1,2.5,-3e5,null,true]}`))
	f.Add(uint64(4), uint8(12), uint16(9000), int16(512), []byte(`not json`))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, budget16 uint16, compressAbove int16, doc []byte) {
		budget := int(budget16) + 64
		r := rand.New(rand.NewPCG(seed, uint64(n)))
		objs := generateObjects(r, int(n%24)+1, budget)
		if extra, ok := normalized(doc); ok {
			objs = append(objs, extra)
		}
		in := splitPhases(r, objs)
		p, err := PlanFor("fuzz", in, Options{Budget: budget, CompressAbove: int(compressAbove)})
		if err != nil {
			var tooLarge *TooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("PlanFor: %v", err)
			}
			if KeyLength+tooLarge.Size <= budget || KeyLength+tooLarge.CompressedSize <= budget {
				t.Fatalf("TooLargeError for an object that fits: %v", err)
			}
			return
		}
		layout(t, in, p, budget)
		if p.Stats.Objects != len(objs) {
			t.Errorf("Stats.Objects = %d, want %d", p.Stats.Objects, len(objs))
		}
	})
}

// generateObjects makes count manifests with sizes from tiny to two budgets, repetitive or random
// content, every kind of JSON value, and some duplicates.
func generateObjects(r *rand.Rand, count, budget int) []map[string]any {
	out := make([]map[string]any, 0, count)
	for i := range count {
		if i > 0 && r.IntN(8) == 0 {
			out = append(out, out[r.IntN(i)]) // the same content again
			continue
		}
		o := object([]string{"ConfigMap", "Secret", "CustomResourceDefinition", "Deployment"}[r.IntN(4)], "", fmt.Sprintf("obj-%d", i))
		if r.IntN(2) == 0 {
			o["metadata"].(map[string]any)["namespace"] = "ns"
		}
		size := r.IntN(min(2*budget, 40_000)) + 1
		o["spec"] = randomValue(r, size, 0)
		out = append(out, o)
	}
	return out
}

// randomValue returns a JSON value of about size bytes, already in the form Resolve gives back
// (integers as int64, other numbers as non-integral float64).
func randomValue(r *rand.Rand, size, depth int) any {
	if size < 24 || depth > 6 {
		switch r.IntN(6) {
		case 0:
			return r.Int64() - r.Int64()
		case 1:
			return float64(r.IntN(1_000_000)) + 0.25
		case 2:
			return r.IntN(2) == 0
		case 3:
			return nil
		default:
			return randomString(r, size)
		}
	}
	switch r.IntN(3) {
	case 0:
		return randomString(r, size)
	case 1:
		parts := r.IntN(5) + 1
		l := make([]any, parts)
		for i := range l {
			l[i] = randomValue(r, size/parts, depth+1)
		}
		return l
	default:
		parts := r.IntN(5) + 1
		m := make(map[string]any, parts)
		for i := range parts {
			m[fmt.Sprintf("k%d-%s", i, randomString(r, 4))] = randomValue(r, size/parts, depth+1)
		}
		return m
	}
}

// randomString is repetitive text (as manifests have) or random characters, some needing escapes.
func randomString(r *rand.Rand, size int) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 <>&\"\\\n\té☃"
	if r.IntN(2) == 0 {
		words := []string{"description", "type", "string", "object", "properties", "x-kubernetes"}
		var b strings.Builder
		for b.Len() < size {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	runes := []rune(chars)
	b := make([]rune, size)
	for i := range b {
		b[i] = runes[r.IntN(len(runes))]
	}
	return string(b)
}

// splitPhases puts objects into phases of 0-9 members, with kept refs here and there.
func splitPhases(r *rand.Rand, objs []map[string]any) Input {
	var in Input
	for len(objs) > 0 || len(in.Phases) == 0 {
		n := min(r.IntN(10), len(objs))
		ph := PhaseInput{Name: fmt.Sprintf("phase-%d", len(in.Phases))}
		for _, o := range objs[:n] {
			if r.IntN(10) == 0 {
				ph.Objects = append(ph.Objects, ObjectInput{Keep: &RefOut{SecretName: "kept", Key: Key([]byte(ph.Name))}})
			}
			ph.Objects = append(ph.Objects, ObjectInput{Object: o})
		}
		objs = objs[n:]
		in.Phases = append(in.Phases, ph)
	}
	return in
}

// normalized parses doc as an object in the form Resolve gives back, if it is one.
func normalized(doc []byte) (map[string]any, bool) {
	var obj map[string]any
	if err := utiljson.Unmarshal(doc, &obj); err != nil || obj == nil {
		return nil, false
	}
	c, err := Canonical(obj)
	if err != nil {
		return nil, false
	}
	obj, err = Resolve(c, "", 0)
	return obj, err == nil
}

// FuzzDecode feeds arbitrary bytes to Decode: it must never panic, never return more than the limit,
// and fail only with ErrTooLarge or ErrCorrupt.
func FuzzDecode(f *testing.F) {
	for _, seed := range decodeSeeds(f) {
		f.Add(seed, uint16(1000))
	}
	f.Add(gz(f, bytes.Repeat([]byte("a"), 100_000)), uint16(500))
	f.Fuzz(func(t *testing.T, stored []byte, limit16 uint16) {
		limit := int64(limit16)
		if limit == 0 {
			limit = MaxDecompressedSize
		}
		out, err := Decode(stored, int64(limit16))
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode error %v is neither ErrTooLarge nor ErrCorrupt", err)
			}
			return
		}
		if int64(len(out)) > limit {
			t.Fatalf("Decode returned %d bytes, limit %d", len(out), limit)
		}
		if !IsGzip(stored) && !bytes.Equal(out, stored) {
			t.Fatalf("plain bytes changed by Decode")
		}
		if again, err := Decode(Gzip(out), limit); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Decode(Gzip(out)) = %d bytes, %v; want the %d bytes back", len(again), err, len(out))
		}
	})
}

// FuzzResolve feeds arbitrary bytes and keys to Resolve: it must never panic, fail only with the
// package's errors, verify content keys, and return objects Canonical can write.
func FuzzResolve(f *testing.F) {
	for _, seed := range decodeSeeds(f) {
		f.Add(seed, "", uint16(1000))
		f.Add(seed, Key(seed), uint16(0))
	}
	f.Fuzz(func(t *testing.T, stored []byte, key string, limit16 uint16) {
		obj, err := Resolve(stored, key, int64(limit16))
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrDigestMismatch) {
				t.Fatalf("Resolve error %v is none of the package's errors", err)
			}
			if errors.Is(err, ErrDigestMismatch) && (!IsContentKey(key) || Key(stored) == key) {
				t.Fatalf("digest mismatch for key %q", key)
			}
			return
		}
		if obj == nil {
			t.Fatal("Resolve returned a nil object and no error")
		}
		if IsContentKey(key) && Key(stored) != key {
			t.Fatalf("content under key %q hashes to %s, yet resolved", key, Key(stored))
		}
		c, err := Canonical(obj)
		if err != nil {
			t.Fatalf("Canonical of a resolved object: %v", err)
		}
		again, err := Resolve(c, Key(c), 0)
		if err != nil {
			t.Fatalf("resolve of the canonical form: %v", err)
		}
		if diff := cmp.Diff(mustCanonical(t, obj), mustCanonical(t, again)); diff != "" {
			t.Fatalf("canonical form not stable (-first +second):\n%s", diff)
		}
	})
}

// decodeSeeds are stored values good and bad.
func decodeSeeds(tb testing.TB) [][]byte {
	obj := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"},"n":[1,2.5,null]}`)
	zipped := Gzip(obj)
	return [][]byte{
		obj, zipped, gz(tb, obj), zipped[:len(zipped)/2], append(bytes.Clone(zipped), zipped...),
		append(bytes.Clone(zipped), 0), {0x1f, 0x8b}, nil, []byte("null"), []byte("[]"), []byte(`{"a":1e999}`),
		[]byte(`{"a":"\ud800"}`), Gzip([]byte("not json")),
	}
}
