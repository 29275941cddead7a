package content

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Canonical returns the canonical JSON of an object, such as the map of an
// unstructured.Unstructured: object keys sorted by bytes, no insignificant whitespace, and no HTML
// escaping of <, > and &. Equal objects give byte-identical output in every run and process; numbers
// are written as encoding/json writes them, so int64(1) and float64(1) both give 1.
//
// Values must be JSON values (maps with string keys, slices, strings, numbers, booleans, nil);
// NaN, infinities, channels and the like are an error.
func Canonical(obj map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeCanonical(&buf, obj); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeCanonical appends the canonical JSON of obj to buf. encoding/json already sorts map keys and
// writes no whitespace; only HTML escaping and the encoder's trailing newline need undoing.
func writeCanonical(buf *bytes.Buffer, obj map[string]any) error {
	start := buf.Len()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		buf.Truncate(start)
		return fmt.Errorf("canonical JSON: %w", err)
	}
	buf.Truncate(buf.Len() - 1) // the newline Encode adds
	return nil
}
