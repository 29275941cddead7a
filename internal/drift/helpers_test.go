package drift

import (
	"encoding/json"
	"io"
	"strings"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// normalize turns json.Number into int64 when integral, else float64, recursively.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = normalize(x)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = normalize(x)
		}
		return v
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	}
	return v
}
