package content

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestResolveErrorsTellNoSize: what resolving a value read from a Secret says when it fails is the
// same whatever the value's length, and holds no number derived from it (issue 27: a forged update
// whose stored refs named default/topsecret:password learnt the password's exact length from
// "not a valid JSON object (21 bytes)"). Each case gives two values of different lengths that fail
// alike; their errors must be equal, through Budget.Resolve and Resolve both.
func TestResolveErrorsTellNoSize(t *testing.T) {
	corruptGzip := func(n int) []byte {
		z := Gzip(sizedObject(n))
		z[len(z)/2] ^= 0xff // flate: corrupt input before offset N
		return z
	}
	badCRC := func(n int) []byte {
		z := Gzip(sizedObject(n))
		z[len(z)-8] ^= 0xff
		return z
	}
	tests := map[string]struct {
		short, long []byte
		plainKeys   bool // the keys are not content keys (as OLM writes them)
		want        error
	}{
		"not JSON":            {short: []byte("hunter2-password"), long: []byte("hunter2-password-but-longer"), plainKeys: true, want: ErrCorrupt},
		"JSON, not an object": {short: []byte(`"short"`), long: []byte(`"a longer string"`), plainKeys: true, want: ErrCorrupt},
		"nested too deep":     {short: []byte(`{"a":` + nest(maxDepth) + `}`), long: []byte(`{"abc":` + nest(maxDepth+5) + `}`), plainKeys: true, want: ErrCorrupt},
		"corrupt deflate":     {short: corruptGzip(5_000), long: corruptGzip(90_000), plainKeys: true, want: ErrCorrupt},
		"bad checksum":        {short: badCRC(200), long: badCRC(4_000), plainKeys: true, want: ErrCorrupt},
		"truncated gzip":      {short: Gzip(sizedObject(300))[:40], long: Gzip(sizedObject(3_000))[:60], plainKeys: true, want: ErrCorrupt},
		"too large, plain":    {short: sizedObject(MaxDecompressedSize + 1), long: sizedObject(MaxDecompressedSize + 99), plainKeys: true, want: ErrTooLarge},
		"too large, gzip":     {short: Gzip(sizedObject(MaxDecompressedSize + 1)), long: Gzip(sizedObject(MaxDecompressedSize + 5000)), plainKeys: true, want: ErrTooLarge},
		"digest mismatch":     {short: []byte(`{"a":"hunter2"}`), long: []byte(`{"a":"hunter2hunter2"}`), want: ErrDigestMismatch},
	}
	// The key a digest mismatch is checked against: a content key that neither value has.
	otherKey := Key([]byte(`{"other":true}`))
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			key := otherKey
			if tc.plainKeys {
				key = "password"
			}
			var msgs []string
			for _, v := range [][]byte{tc.short, tc.long} {
				_, err := NewBudget(0).Resolve(context.Background(), "default/topsecret/password", v, key)
				if !errors.Is(err, tc.want) {
					t.Fatalf("Budget.Resolve: %v, want %v", err, tc.want)
				}
				_, err2 := Resolve(v, key, MaxDecompressedSize)
				if !errors.Is(err2, tc.want) {
					t.Fatalf("Resolve: %v, want %v", err2, tc.want)
				}
				for _, e := range []error{err, err2} {
					msg := e.Error()
					for _, size := range []int{len(v)} {
						if strings.Contains(msg, strconv.Itoa(size)) {
							t.Errorf("%q tells the value's length %d", msg, len(v))
						}
					}
					if bytes.Contains(v, []byte("hunter2")) && strings.Contains(msg, "hunter2") {
						t.Errorf("%q quotes the value", msg)
					}
					if strings.Contains(msg, Key(v)) {
						t.Errorf("%q tells the value's digest", msg)
					}
				}
				msgs = append(msgs, err.Error(), err2.Error())
			}
			if msgs[0] != msgs[2] || msgs[1] != msgs[3] {
				t.Errorf("values of different lengths fail differently:\n%q\n%q\n%q\n%q", msgs[0], msgs[2], msgs[1], msgs[3])
			}
		})
	}
}
