package content

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKey(t *testing.T) {
	tests := map[string]struct {
		stored []byte
		want   string
	}{
		// SHA-256("") = e3b0c442...b855, in base64url without padding.
		"empty": {nil, "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"},
		// SHA-256("abc") = ba7816bf...15ad.
		"abc": {[]byte("abc"), "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Key(tc.stored)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Key (-want +got):\n%s", diff)
			}
			if len(got) != KeyLength || !IsContentKey(got) {
				t.Errorf("Key %q: length %d, IsContentKey %v", got, len(got), IsContentKey(got))
			}
		})
	}
}

// TestKeyAlphabet checks many keys: always 43 characters of the base64url alphabet, no padding.
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestKeyAlphabet(t *testing.T) {
	for i := range 2000 {
		k := Key([]byte{byte(i), byte(i >> 8)})
		if len(k) != KeyLength || strings.Trim(k, alphabet) != "" || !IsContentKey(k) {
			t.Fatalf("Key %d = %q: not 43 base64url characters", i, k)
		}
	}
}

func TestIsContentKey(t *testing.T) {
	valid := Key([]byte("x"))
	sum := sha256.Sum256([]byte("x"))
	// 43 characters carry 258 bits: the last character's 2 spare bits must be zero. A key's last
	// character has an index divisible by 4; the next one sets a spare bit.
	spare := valid[:42] + string(alphabet[strings.IndexByte(alphabet, valid[42])+1])
	tests := map[string]struct {
		s    string
		want bool
	}{
		"a key":               {valid, true},
		"empty":               {"", false},
		"hand-written key":    {"deployment", false},
		"one short":           {valid[:42], false},
		"one long":            {valid + "A", false},
		"padded":              {base64.URLEncoding.EncodeToString(sum[:]), false},
		"std alphabet plus":   {"+" + valid[1:], false},
		"std alphabet slash":  {"/" + valid[1:], false},
		"space":               {" " + valid[1:], false},
		"non-zero spare bits": {spare, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := IsContentKey(tc.s); got != tc.want {
				t.Errorf("IsContentKey(%q) = %v, want %v", tc.s, got, tc.want)
			}
		})
	}
}
