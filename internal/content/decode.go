package content

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// MaxDecompressedSize is the default cap on the JSON a stored value may hold (as upstream readers do).
const MaxDecompressedSize = 10 << 20

var (
	// ErrTooLarge means a stored value holds more JSON than the caller's limit.
	ErrTooLarge = errors.New("content larger than the limit")
	// ErrCorrupt means a stored value is neither valid gzip nor a valid JSON object.
	ErrCorrupt = errors.New("corrupt content")
	// ErrDigestMismatch means the bytes stored under a content key do not hash to that key: the
	// content was changed after it was written.
	ErrDigestMismatch = errors.New("content does not match its key")
	// ErrNotObject means a stored value decodes but does not hold one JSON object: it is not valid
	// JSON, is nested too deep, or is not an object. Such errors are ErrCorrupt too.
	ErrNotObject = errors.New("not a JSON object")
)

// notObject is a value that decodes to something other than one JSON object, for the reason given
// (a fixed text, never content).
func notObject(reason string) error {
	return fmt.Errorf("%w: %w", ErrCorrupt, notObjectError(reason))
}

// notObjectError is the reason of notObject; it is ErrNotObject to errors.Is.
type notObjectError string

func (e notObjectError) Error() string { return string(e) }

// Is makes a notObjectError ErrNotObject.
func (e notObjectError) Is(target error) bool { return target == ErrNotObject }

// gzipMagic starts every gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// IsGzip reports whether stored bytes are gzip-compressed, by their first two bytes.
func IsGzip(stored []byte) bool { return bytes.HasPrefix(stored, gzipMagic) }

// Decode returns the JSON held by stored bytes: gunzipped when they start with 1f 8b, else the bytes
// themselves (not copied). More than limit bytes of output is ErrTooLarge (limit <= 0 means
// MaxDecompressedSize), checked while inflating so a small bomb never inflates past the limit; bad
// gzip is ErrCorrupt. Errors carry the limit and gzip's fixed messages, never content bytes nor the
// value's size. Decode does not check that the output is JSON: Resolve does.
func Decode(stored []byte, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = MaxDecompressedSize
	}
	if !IsGzip(stored) {
		if int64(len(stored)) > limit {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		return stored, nil
	}
	return gunzip(stored, limit)
}

// gunzip inflates one or more concatenated gzip members, refusing output past limit.
func gunzip(stored []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(stored))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, gzipError(err))
	}
	var out bytes.Buffer
	out.Grow(int(min(limit, int64(len(stored))*8, 1<<20)))
	n, err := out.ReadFrom(io.LimitReader(zr, limit+1))
	switch {
	case n > limit:
		return nil, fmt.Errorf("%w: inflates past %d bytes", ErrTooLarge, limit)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, gzipError(err))
	}
	return out.Bytes(), nil
}

// Resolve returns the object held by stored bytes, as Secret data under key holds it. When key is a
// content key (IsContentKey) the bytes must hash to it first (ErrDigestMismatch); then they are
// decoded (see Decode) and parsed as a JSON object the way unstructured.Unstructured parses, integers
// as int64. Errors never contain content.
func Resolve(stored []byte, key string, limit int64) (map[string]any, error) {
	if err := verifyKey(stored, key); err != nil {
		return nil, err
	}
	data, err := Decode(stored, limit)
	if err != nil {
		return nil, err
	}
	return parseObject(data)
}

// verifyKey checks that stored bytes hash to key when key is a content key (ErrDigestMismatch).
func verifyKey(stored []byte, key string) error {
	if IsContentKey(key) {
		if got := Key(stored); got != key {
			// Not the digest it has: that is a function of content the caller may not read.
			return fmt.Errorf("%w: key %s", ErrDigestMismatch, key)
		}
	}
	return nil
}

// parseObject parses a JSON object. Parser errors are dropped, not wrapped: they may quote content.
func parseObject(data []byte) (map[string]any, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return nil, notObject("not a valid JSON object")
	}
	if obj == nil {
		return nil, notObject("JSON null where an object was expected")
	}
	return obj, nil
}

// gzipError is what a gzip failure may say: gzip's own sentinel errors, whose messages are fixed;
// others, such as flate's "corrupt input before offset N", would tell a position in the value.
func gzipError(err error) error {
	for _, known := range []error{gzip.ErrHeader, gzip.ErrChecksum, io.ErrUnexpectedEOF} {
		if errors.Is(err, known) {
			return known
		}
	}
	return errGzip
}

// errGzip is a gzip stream that does not inflate, for a reason not told.
var errGzip = errors.New("gzip: not a valid stream")
