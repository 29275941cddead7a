package content

import (
	"errors"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of arrays and objects a stored value may have: encoding/json's
// limit, and so the API server's decoder's (sigs.k8s.io/json): no object the API server stores is
// deeper. Deeper values are corrupt, and are never parsed.
const maxDepth = 10000

// The heap that parsing keeps for each part of a JSON value decoded into map[string]any the way
// unstructured.Unstructured decodes (sigs.k8s.io/json), with Go 1.26's swiss-table maps on 64-bit
// platforms. BenchmarkHeapEstimate measures them (docs/benchmarks/): the live heap after a
// collection, per container or scalar of arrays of 10,000 of them, against the estimate. Sizes are
// upper bounds of what is kept. The garbage of growing slices and maps is not counted (parsing
// allocates 1-2.3 times the estimate in all, B/op), nor is the inflated JSON itself.
const (
	// emptyMapBytes is an object without members: make(map[string]any), the map header alone
	// (measured 48).
	emptyMapBytes = 48
	// smallMapBytes is an object of 1 to 8 members: the header and one group of 8 slots of 16-byte
	// keys and values, 264 bytes in a 288-byte size class (measured 336).
	smallMapBytes = 336
	// mapMemberBytes is each member of a larger object, besides the header: tables of 33-byte slots
	// (key, value, control byte) at a load of at most 7/8, doubled when full, so 2.3 slots a member
	// just after growing, in size classes up to 21% larger (measured 44-91 from 9 to 7,170 members;
	// 91 at 449 members, just grown to a table of 1,024 slots in 40 KiB).
	mapMemberBytes = 96
	// arrayBytes is an array, boxed in an interface: its slice header (measured 24).
	arrayBytes = 24
	// elementBytes is each element of an array: a 16-byte interface in a backing array that append
	// grows to at most twice the length (measured 16-26; just under 32 one past a power of two).
	elementBytes = 32
	// stringBytes is a string value boxed in an interface, besides its bytes (measured 16).
	stringBytes = 16
	// numberBytes is a number, an int64 or float64 boxed in an interface: 8 bytes in a 16-byte block
	// of the tiny allocator, which the number's garbage text may share (measured 0 for integers
	// 0-255, 16 for others).
	numberBytes = 16
)

// errSyntax and errDepth are what heapEstimate refuses; Budget reports both as ErrCorrupt.
var (
	errSyntax = errors.New("not valid JSON")
	errDepth  = errors.New("nested too deep")
)

// heapEstimate returns an upper bound of the heap that parsing data into map[string]any keeps,
// without parsing it: one pass over the bytes counting containers, members and scalars, and the
// decoded length of strings and keys. It refuses exactly what encoding/json's syntax check refuses
// (json.Valid, FuzzHeapEstimate), including values nested deeper than maxDepth (errDepth), and any
// JSON value is accepted: whether it is an object is left to the parser. It allocates only its stack
// of open containers.
func heapEstimate(data []byte) (int64, error) {
	s := estimator{data: data}
	if err := s.run(); err != nil {
		return 0, err
	}
	return s.bytes, nil
}

// estimator is the state of one heapEstimate.
type estimator struct {
	data  []byte
	i     int
	bytes int64
	open  []container
}

// container is an open array or object and its elements or members so far.
type container struct {
	object bool
	n      int64
}

// run scans one JSON value surrounded by whitespace, without recursion.
func (s *estimator) run() error {
	for {
		opened, err := s.value()
		if err != nil {
			return err
		}
		if opened {
			continue // the first element or member of a container
		}
		done, err := s.afterValue()
		if err != nil || done {
			return err
		}
	}
}

// value scans the value expected next and counts it. opened: it opened a container that is not
// empty, whose first element (or member's value, its key scanned) is expected next.
func (s *estimator) value() (opened bool, err error) {
	s.space()
	if s.i >= len(s.data) {
		return false, errSyntax
	}
	switch c := s.data[s.i]; c {
	case '{', '[':
		if len(s.open) == maxDepth {
			return false, errDepth
		}
		s.i++
		s.open = append(s.open, container{object: c == '{'})
		s.space()
		if s.i < len(s.data) && s.data[s.i] == c+2 { // } or ]
			s.i++
			s.close()
			return false, nil
		}
		if c == '[' {
			s.open[len(s.open)-1].n++
			return true, nil
		}
		return true, s.key()
	case '"':
		n, ok := s.str()
		if !ok {
			return false, errSyntax
		}
		s.bytes += stringBytes + allocSize(n)
	case 't':
		if !s.literal("true") {
			return false, errSyntax
		}
	case 'f':
		if !s.literal("false") {
			return false, errSyntax
		}
	case 'n':
		if !s.literal("null") {
			return false, errSyntax
		}
	default:
		if !s.number() {
			return false, errSyntax
		}
		s.bytes += numberBytes
	}
	return false, nil
}

// afterValue scans what follows a value: the containers it ends and then the end of the data (done)
// or the comma (and key) before the next value of its container.
func (s *estimator) afterValue() (done bool, err error) {
	for {
		s.space()
		if len(s.open) == 0 {
			if s.i != len(s.data) {
				return false, errSyntax
			}
			return true, nil
		}
		if s.i >= len(s.data) {
			return false, errSyntax
		}
		top := &s.open[len(s.open)-1]
		c := s.data[s.i]
		s.i++
		switch {
		case c == ',' && top.object:
			return false, s.key()
		case c == ',':
			top.n++
			return false, nil
		case c == '}' && top.object, c == ']' && !top.object:
			s.close()
		default:
			return false, errSyntax
		}
	}
}

// key scans a member's key and its colon, and counts the member.
func (s *estimator) key() error {
	s.space()
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return errSyntax
	}
	n, ok := s.str()
	if !ok {
		return errSyntax
	}
	s.space()
	if s.i >= len(s.data) || s.data[s.i] != ':' {
		return errSyntax
	}
	s.i++
	s.bytes += allocSize(n)
	s.open[len(s.open)-1].n++
	return nil
}

// close ends the innermost container, counting what it holds.
func (s *estimator) close() {
	c := s.open[len(s.open)-1]
	s.open = s.open[:len(s.open)-1]
	s.bytes += containerBytes(c)
}

// containerBytes is the heap an array or object of c.n elements or members keeps, besides theirs.
func containerBytes(c container) int64 {
	switch {
	case !c.object:
		return arrayBytes + elementBytes*c.n
	case c.n == 0:
		return emptyMapBytes
	case c.n <= 8:
		return smallMapBytes
	default:
		return emptyMapBytes + mapMemberBytes*c.n
	}
}

// allocSize bounds what an allocation of n pointer-free bytes keeps: under 16 bytes, a whole 16-byte
// block of the tiny allocator (shared with others, maybe garbage); Go's size classes are 16 bytes
// apart up to 128 and at most 1/8 apart up to 32 KiB; larger allocations take whole 8 KiB pages.
func allocSize(n int64) int64 {
	switch {
	case n == 0:
		return 0
	case n <= 128:
		return (n + 15) &^ 15
	case n <= 32<<10:
		return n + n/8 + 16
	default:
		return (n + 8191) &^ 8191
	}
}

// space skips JSON whitespace.
func (s *estimator) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// literal scans true, false or null.
func (s *estimator) literal(word string) bool {
	if len(s.data)-s.i < len(word) || string(s.data[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// number scans a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *estimator) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case '1' <= c && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits skips decimal digits and reports whether there was one.
func (s *estimator) digits() bool {
	start := s.i
	for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// peek is the next byte, 0 at the end.
func (s *estimator) peek() byte {
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// str scans a string from its opening quote and returns at least the length of its decoded bytes:
// an escape counts its character's (3 for \u, enough for a surrogate pair's 4 in 2), and a byte
// that is not UTF-8 counts 3, the U+FFFD the decoder puts in its place.
func (s *estimator) str() (int64, bool) {
	var n int64
	i := s.i + 1
	for i < len(s.data) {
		c := s.data[i]
		switch {
		case c == '"':
			s.i = i + 1
			return n, true
		case c == '\\':
			if i+1 >= len(s.data) {
				return 0, false
			}
			switch s.data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				n++
				i += 2
			case 'u':
				if len(s.data)-i < 6 || !isHex(s.data[i+2]) || !isHex(s.data[i+3]) || !isHex(s.data[i+4]) || !isHex(s.data[i+5]) {
					return 0, false
				}
				n += 3
				i += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c < utf8.RuneSelf:
			n++
			i++
		default:
			r, size := utf8.DecodeRune(s.data[i:])
			if r == utf8.RuneError && size == 1 {
				n += 3
			} else {
				n += int64(size)
			}
			i += size
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
