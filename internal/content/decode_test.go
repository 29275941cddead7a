package content

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// secretMarker is planted in content to check that no error ever repeats content.
const secretMarker = "hunter2-do-not-leak"

func TestIsGzip(t *testing.T) {
	tests := map[string]struct {
		b    []byte
		want bool
	}{
		"gzip":         {gz(t, []byte("{}")), true},
		"magic only":   {[]byte{0x1f, 0x8b}, true},
		"json":         {[]byte(`{"a":1}`), false},
		"empty":        {nil, false},
		"one byte":     {[]byte{0x1f}, false},
		"swapped":      {[]byte{0x8b, 0x1f, 0, 0}, false},
		"json with 1f": {[]byte("\x1f{}"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := IsGzip(tc.b); got != tc.want {
				t.Errorf("IsGzip = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	plain := []byte(`{"kind":"ConfigMap","data":{"k":"` + secretMarker + `"}}`)
	zipped := gz(t, plain)
	big := bytes.Repeat([]byte("a"), 1<<20) // inflates 1000x: a small bomb
	bomb := gz(t, big)
	badCRC := bytes.Clone(zipped)
	badCRC[len(badCRC)-8] ^= 0xff
	badHeader := append([]byte{0x1f, 0x8b, 99}, zipped[3:]...) // compression method 99
	badData := bytes.Clone(zipped)
	badData[12] ^= 0xff

	tests := map[string]struct {
		stored  []byte
		limit   int64
		want    []byte
		wantErr error
	}{
		"plain":                        {plain, 100, plain, nil},
		"plain at the limit":           {plain, int64(len(plain)), plain, nil},
		"plain over the limit":         {plain, int64(len(plain)) - 1, nil, ErrTooLarge},
		"gzip":                         {zipped, 100, plain, nil},
		"gzip at the limit":            {zipped, int64(len(plain)), plain, nil},
		"gzip over the limit":          {zipped, int64(len(plain)) - 1, nil, ErrTooLarge},
		"bomb under the default limit": {bomb, 0, big, nil},
		"bomb over the limit":          {bomb, 1 << 19, nil, ErrTooLarge},
		"empty":                        {nil, 10, nil, nil},
		"magic only":                   {[]byte{0x1f, 0x8b}, 10, nil, ErrCorrupt},
		"bad method":                   {badHeader, 100, nil, ErrCorrupt},
		"truncated":                    {zipped[:len(zipped)-5], 100, nil, ErrCorrupt},
		"bad checksum":                 {badCRC, 100, nil, ErrCorrupt},
		"bad data":                     {badData, 100, nil, ErrCorrupt},
		"trailing garbage":             {append(bytes.Clone(zipped), "garbage"...), 100, nil, ErrCorrupt},
		"two members":                  {append(bytes.Clone(zipped), zipped...), 1000, append(bytes.Clone(plain), plain...), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Decode(tc.stored, tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Decode error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), secretMarker) {
					t.Errorf("error contains content: %v", err)
				}
				return
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("Decode = %d bytes, want %d", len(got), len(tc.want))
			}
		})
	}
}

// TestDecodeDefaultLimit checks that a limit <= 0 means MaxDecompressedSize.
func TestDecodeDefaultLimit(t *testing.T) {
	zeros := make([]byte, MaxDecompressedSize+1)
	over := gz(t, zeros)
	for _, limit := range []int64{0, -1} {
		if _, err := Decode(over, limit); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Decode(limit %d) of %d bytes: error %v, want ErrTooLarge", limit, MaxDecompressedSize+1, err)
		}
	}
	exact := gz(t, zeros[:MaxDecompressedSize])
	if got, err := Decode(exact, 0); err != nil || len(got) != MaxDecompressedSize {
		t.Errorf("Decode of exactly MaxDecompressedSize: %d bytes, error %v", len(got), err)
	}
}

func TestResolve(t *testing.T) {
	withPassword := func(p string) map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": "s", "labels": map[string]any{"a": "b"}},
			"stringData": map[string]any{"password": p},
			"spec":       map[string]any{"replicas": int64(3), "ratio": 0.5, "list": []any{int64(1), "x", nil, true}},
		}
	}
	obj := withPassword(secretMarker)
	plain := mustCanonical(t, obj)
	zipped := Gzip(plain)
	tampered := mustCanonical(t, withPassword("hunter3-do-not-leak"))

	tests := map[string]struct {
		stored  []byte
		key     string
		limit   int64
		want    map[string]any
		wantErr error
	}{
		"plain under its key":              {plain, Key(plain), 0, obj, nil},
		"gzip under its key":               {zipped, Key(zipped), 0, obj, nil},
		"hand-written key is not verified": {tampered, "password-object", 0, withPassword("hunter3-do-not-leak"), nil},
		"tampered under a content key":     {tampered, Key(plain), 0, nil, ErrDigestMismatch},
		"gzip under the plain key":         {zipped, Key(plain), 0, nil, ErrDigestMismatch},
		"over the limit":                   {zipped, Key(zipped), 10, nil, ErrTooLarge},
		"corrupt gzip":                     {zipped[:20], "k", 0, nil, ErrCorrupt},
		"not JSON":                         {[]byte(secretMarker), "k", 0, nil, ErrCorrupt},
		"truncated JSON":                   {plain[:len(plain)-1], "k", 0, nil, ErrCorrupt},
		"trailing JSON":                    {append(bytes.Clone(plain), `{"a":"`+secretMarker+`"}`...), "k", 0, nil, ErrCorrupt},
		"array":                            {[]byte(`["` + secretMarker + `"]`), "k", 0, nil, ErrCorrupt},
		"string":                           {[]byte(`"` + secretMarker + `"`), "k", 0, nil, ErrCorrupt},
		"number":                           {[]byte(`1e999`), "k", 0, nil, ErrCorrupt},
		"null":                             {[]byte(`null`), "k", 0, nil, ErrCorrupt},
		"empty":                            {nil, "k", 0, nil, ErrCorrupt},
		"huge number in object":            {[]byte(`{"n":1e999}`), "k", 0, nil, ErrCorrupt},
		"empty object":                     {[]byte(`{}`), "k", 0, map[string]any{}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Resolve(tc.stored, tc.key, tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Resolve error = %v, want %v", err, tc.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), secretMarker) || strings.Contains(err.Error(), "hunter3")) {
				t.Errorf("error contains content: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
		})
	}
}
