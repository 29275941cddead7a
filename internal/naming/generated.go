package naming

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"maps"
	"slices"
	"strings"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// The names cos-externalizer gives what it creates: object-data Secrets (SecretName) and the
// revision-name label value of a ClusterObjectSet (RevisionLabelValue). Deterministic, so that every
// writer (the webhook, kubectl cos) and every reader (the reconciler, the guard, the sweep) agrees.

// hashHexLength is the length of the hex hash in generated names: 8 bytes of SHA-256.
const hashHexLength = 16

// SecretName returns the name of the Secret holding data for the ClusterObjectSet cosName:
// "<cosName>-<16 hex>", the hex being the first 8 bytes of SHA-256 over the data's keys and values in
// key order, each written as an 8-byte big-endian length and its bytes.
//
// A name of at most 253 characters (a DNS subdomain) needs cosName to be at most 236 characters. A
// longer cosName is truncated, and trailing '-' and '.' trimmed so the result stays a valid DNS
// subdomain; the full cosName, length-prefixed, is then hashed before the data, so two long names with
// a common prefix never share a Secret name. (The odd number of length-prefixed fields keeps these
// hashes apart from those of data alone.) The result is a valid DNS subdomain whenever cosName is one,
// as every ClusterObjectSet name is.
func SecretName(cosName string, data map[string][]byte) string {
	prefix := cosName
	h := sha256.New()
	if maxPrefix := utilvalidation.DNS1123SubdomainMaxLength - 1 - hashHexLength; len(cosName) > maxPrefix {
		prefix = strings.TrimRight(cosName[:maxPrefix], "-.")
		writeField(h, cosName)
	}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		writeField(h, k)
		writeField(h, data[k])
	}
	return joinHash(prefix, h)
}

// RevisionLabelValue returns the value of the olm.operatorframework.io/revision-name label for the
// ClusterObjectSet cosName: cosName itself when it is a valid label value (at most 63 characters, and
// so on), else "<prefix>-<16 hex>", the hex being the first 8 bytes of SHA-256 over the full cosName
// and the prefix the longest start of cosName that keeps the result a valid label value. Different
// names give different values (up to the hash).
func RevisionLabelValue(cosName string) string {
	if len(utilvalidation.IsValidLabelValue(cosName)) == 0 {
		return cosName
	}
	h := sha256.New()
	_, _ = io.WriteString(h, cosName)
	prefix := labelPrefix(cosName, utilvalidation.LabelValueMaxLength-1-hashHexLength)
	return joinHash(prefix, h)
}

// labelPrefix returns at most n bytes of the start of s as a label value: characters a label value may
// not hold become '-', and the ends are trimmed to alphanumerics.
func labelPrefix(s string, n int) string {
	b := []byte(s[:min(n, len(s))])
	for i, c := range b {
		if !isAlphanumeric(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-_.") // b is ASCII now: only these can be at the ends
}

func isAlphanumeric(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// joinHash returns prefix-<first 8 bytes of h in hex>, or only the hex when prefix is empty.
func joinHash(prefix string, h hash.Hash) string {
	suffix := hex.EncodeToString(h.Sum(nil)[:hashHexLength/2])
	if prefix == "" {
		return suffix
	}
	return prefix + "-" + suffix
}

// writeField writes b to h as an 8-byte big-endian length and its bytes.
func writeField[T string | []byte](h hash.Hash, b T) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	_, _ = h.Write(n[:])
	_, _ = h.Write([]byte(b))
}
