package content

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Canonical returns the canonical JSON of an object, such as the map of an
// unstructured.Unstructured: object keys sorted by bytes, no insignificant whitespace, and no HTML
// escaping of <, > and &. Equal objects give byte-identical output in every run and process; numbers
// are written as encoding/json writes them, so int64(1) and float64(1) both give 1.
//
// Values must be JSON values (maps with string keys, slices, strings, numbers, booleans, nil);
// NaN, infinities, channels and the like are an error.
func Canonical(obj map[string]any) ([]byte, error) {
	buf := plainBuffers.Get().(*[]byte)
	defer plainBuffers.Put(buf)
	c, err := appendCanonical((*buf)[:0], obj)
	*buf = c[:0]
	if err != nil {
		return nil, err
	}
	return bytes.Clone(c), nil // exact size: callers keep it
}

// plainBuffers recycles the buffers canonical JSON is written to.
var plainBuffers = sync.Pool{New: func() any { return new([]byte) }}

// appendCanonical appends the canonical JSON of obj to dst; on error dst is returned as it was
// (its spare capacity may have been written).
//
// The output is byte for byte what encoding/json writes with SetEscapeHTML(false), without the
// encoder's trailing newline: encoding/json sorts map keys and writes no whitespace. The values
// unstructured objects are made of (maps, slices, strings, int64, float64, booleans, nil) are written
// here directly, 3-4x faster than through reflection; any other type, and an object that fails, go
// through encoding/json itself, so that its output and its errors are the standard library's.
// FuzzCanonicalMatchesEncodingJSON holds the two writers to the same bytes.
func appendCanonical(dst []byte, obj map[string]any) ([]byte, error) {
	e := canonicalEncoders.Get().(*canonicalEncoder)
	defer canonicalEncoders.Put(e)
	start := len(dst)
	if out, ok := e.appendMap(dst, obj, 0); ok {
		return out, nil
	}
	// A value the fast path does not write (NaN, an infinity, a cycle, a type encoding/json refuses):
	// encoding/json writes the whole object, or says what is wrong with it.
	out, err := appendEncodingJSON(dst[:start], obj)
	if err != nil {
		return dst[:start], fmt.Errorf("canonical JSON: %w", err)
	}
	return out, nil
}

// canonicalEncoder holds the members of the maps being written, one slice per nesting level, for reuse.
type canonicalEncoder struct {
	members [][]member
}

// member is one key and value of a map.
type member struct {
	key   string
	value any
}

func compareMembers(a, b member) int { return strings.Compare(a.key, b.key) }

var canonicalEncoders = sync.Pool{New: func() any { return new(canonicalEncoder) }}

// maxFastDepth is the nesting depth past which values are left to encoding/json, which detects
// cycles (from 1000 levels on); a map that contains itself would otherwise recurse forever here.
const maxFastDepth = 500

// appendValue appends the JSON of v; false means the object must go through encoding/json.
func (e *canonicalEncoder) appendValue(b []byte, v any, depth int) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendJSONString(b, v), true
	case map[string]any:
		return e.appendMap(b, v, depth+1)
	case []any:
		return e.appendSlice(b, v, depth+1)
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case float64:
		return appendJSONFloat(b, v)
	case bool:
		if v {
			return append(b, "true"...), true
		}
		return append(b, "false"...), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int32:
		return strconv.AppendInt(b, int64(v), 10), true
	}
	out, err := appendEncodingJSON(b, v)
	return out, err == nil
}

func (e *canonicalEncoder) appendMap(b []byte, m map[string]any, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		out, err := appendEncodingJSON(b, m)
		return out, err == nil
	}
	if m == nil {
		return append(b, "null"...), true
	}
	for len(e.members) <= depth {
		e.members = append(e.members, nil)
	}
	members := e.members[depth][:0]
	for k, v := range m {
		members = append(members, member{k, v})
	}
	slices.SortFunc(members, compareMembers) // byte order, as encoding/json sorts
	e.members[depth] = members
	b = append(b, '{')
	ok := true
	for i, kv := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, kv.key)
		b = append(b, ':')
		if b, ok = e.appendValue(b, kv.value, depth); !ok {
			break
		}
	}
	clear(members) // do not keep the object's values alive in the pool
	return append(b, '}'), ok
}

func (e *canonicalEncoder) appendSlice(b []byte, s []any, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		out, err := appendEncodingJSON(b, s)
		return out, err == nil
	}
	if s == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = e.appendValue(b, v, depth); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

// appendEncodingJSON appends what encoding/json writes for v without HTML escaping.
func appendEncodingJSON(b []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	out := buf.Bytes()
	return out[:len(out)-1], nil // the newline Encode adds
}

// appendJSONFloat writes a float64 as encoding/json does: like %g but with exponents only below 1e-6
// and from 1e21 on, and not padded to two digits. NaN and infinities are not JSON (false).
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// jsonPlain[c] is true for the ASCII bytes a JSON string holds as they are (HTML characters included).
var jsonPlain = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	hexDigits   = "0123456789abcdef"
	ones, highs = 0x0101010101010101, 0x8080808080808080
)

// appendJSONString writes s quoted as encoding/json does without HTML escaping: \" \\ \b \f \n \r \t,
// other control characters as \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip 8 plain bytes at a time: most strings are long ASCII descriptions.
		for ; i+8 <= len(s); i += 8 {
			// The 8 bytes as one word; (v - ones) & ^v has the high bit of some byte set iff some
			// byte of v is 0 (for the first term: below 0x20), and x has one iff some byte is not
			// ASCII. Exact: the loop stops at any 8 bytes holding a byte jsonPlain refuses.
			x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			quote, backslash := x^(ones*'"'), x^(ones*'\\')
			if ((x-ones*0x20)&^x|(quote-ones)&^quote|(backslash-ones)&^backslash|x)&highs != 0 {
				break
			}
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonPlain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
