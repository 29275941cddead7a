package content

import (
	"crypto/sha256"
	"encoding/base64"
)

// KeyLength is the length of every content key: base64url without padding of a SHA-256 digest.
const KeyLength = 43

// keyEncoding rejects non-zero padding bits, so every digest has exactly one key.
var keyEncoding = base64.RawURLEncoding.Strict()

// Key returns the content key of stored bytes: base64url without padding of SHA-256 over them,
// always KeyLength characters. The key names the exact bytes stored, compressed or not.
func Key(stored []byte) string {
	sum := sha256.Sum256(stored)
	return keyEncoding.EncodeToString(sum[:])
}

// IsContentKey reports whether s has the form of a Key: KeyLength characters of the base64url
// alphabet that decode (strictly) to 32 bytes. Keys of this form are verified on reading; other Secret
// keys, as users may write by hand, are not.
func IsContentKey(s string) bool {
	if len(s) != KeyLength {
		return false
	}
	var digest [sha256.Size + 1]byte // room to notice an over-long decoding
	n, err := keyEncoding.Decode(digest[:], []byte(s))
	return err == nil && n == sha256.Size
}
