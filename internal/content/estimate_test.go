package content

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// nest is depth arrays, one in another.
func nest(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

func TestHeapEstimate(t *testing.T) {
	const (
		key1   = 16 // allocSize of a short key or string
		number = numberBytes
		elem   = elementBytes
	)
	tests := map[string]struct {
		in      string
		want    int64
		wantErr error
	}{
		"empty object":            {in: `{}`, want: emptyMapBytes},
		"one member":              {in: `{"a":1}`, want: smallMapBytes + key1 + number},
		"eight members":           {in: `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}`, want: smallMapBytes + 8*(key1+number)},
		"nine members":            {in: `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}`, want: emptyMapBytes + 9*(mapMemberBytes+key1+number)},
		"duplicate keys count":    {in: `{"a":1,"a":2}`, want: smallMapBytes + 2*(key1+number)},
		"empty array":             {in: `[]`, want: arrayBytes},
		"array of numbers":        {in: `[1,-2.5,3e10]`, want: arrayBytes + 3*(elem+number)},
		"array of literals":       {in: `[true,false,null]`, want: arrayBytes + 3*elem},
		"arrays in arrays":        {in: `[[[]]]`, want: 3*arrayBytes + 2*elem},
		"empty objects":           {in: `[{},{}]`, want: arrayBytes + 2*(elem+emptyMapBytes)},
		"whitespace":              {in: " \t\r\n{ \"a\" :\n[ ] }\n", want: smallMapBytes + key1 + arrayBytes},
		"empty string":            {in: `""`, want: stringBytes},
		"short string":            {in: `"abc"`, want: stringBytes + 16},
		"string of 200":           {in: `"` + strings.Repeat("x", 200) + `"`, want: stringBytes + 200 + 25 + 16},
		"string of 40000":         {in: `"` + strings.Repeat("x", 40000) + `"`, want: stringBytes + 40960},
		"escapes count their own": {in: `"\n\"\\\/\b\f\r\t"`, want: stringBytes + 16},
		"unicode escape counts 3": {in: `"` + strings.Repeat(`\u00e9`, 10) + `"`, want: stringBytes + 32},
		"UTF-8 counts its bytes":  {in: `"` + strings.Repeat("é", 10) + `"`, want: stringBytes + 32},
		"not UTF-8 counts 3":      {in: "\"" + strings.Repeat("\xff", 10) + "\"", want: stringBytes + 32},
		"literals":                {in: `null`, want: 0},
		"number forms":            {in: `[0,-0,10,0.5,1e5,1E+5,1e-5,-1.5e-05]`, want: arrayBytes + 8*(elem+number)},
		"nested as deep as json":  {in: nest(maxDepth), want: maxDepth*arrayBytes + (maxDepth-1)*elem},

		"nothing":              {in: ``, wantErr: errSyntax},
		"only space":           {in: ` `, wantErr: errSyntax},
		"unclosed object":      {in: `{`, wantErr: errSyntax},
		"unclosed array":       {in: `[1`, wantErr: errSyntax},
		"unopened":             {in: `}`, wantErr: errSyntax},
		"mismatched":           {in: `[}`, wantErr: errSyntax},
		"mismatched object":    {in: `{]`, wantErr: errSyntax},
		"key without value":    {in: `{"a"}`, wantErr: errSyntax},
		"colon without value":  {in: `{"a":}`, wantErr: errSyntax},
		"trailing comma":       {in: `{"a":1,}`, wantErr: errSyntax},
		"trailing array comma": {in: `[1,]`, wantErr: errSyntax},
		"leading comma":        {in: `[,1]`, wantErr: errSyntax},
		"missing comma":        {in: `[1 2]`, wantErr: errSyntax},
		"number key":           {in: `{1:2}`, wantErr: errSyntax},
		"leading zero":         {in: `01`, wantErr: errSyntax},
		"no fraction digits":   {in: `1.`, wantErr: errSyntax},
		"no integer part":      {in: `.5`, wantErr: errSyntax},
		"minus alone":          {in: `-`, wantErr: errSyntax},
		"no exponent digits":   {in: `1e+`, wantErr: errSyntax},
		"plus sign":            {in: `+1`, wantErr: errSyntax},
		"short literal":        {in: `tru`, wantErr: errSyntax},
		"wrong literal":        {in: `nul1`, wantErr: errSyntax},
		"unclosed string":      {in: `"abc`, wantErr: errSyntax},
		"control character":    {in: "\"a\x01\"", wantErr: errSyntax},
		"unknown escape":       {in: `"\q"`, wantErr: errSyntax},
		"short unicode":        {in: `"\u12"`, wantErr: errSyntax},
		"bad unicode":          {in: `"\u12g4"`, wantErr: errSyntax},
		"escape at the end":    {in: `"\`, wantErr: errSyntax},
		"two values":           {in: `{} {}`, wantErr: errSyntax},
		"garbage after":        {in: `{}x`, wantErr: errSyntax},
		"byte order mark":      {in: "\xef\xbb\xbf{}", wantErr: errSyntax},
		"one too deep":         {in: nest(maxDepth + 1), wantErr: errDepth},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := heapEstimate([]byte(tc.in))
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Errorf("heapEstimate = %d, %v; want %d, %v", got, err, tc.want, tc.wantErr)
			}
			if valid := json.Valid([]byte(tc.in)); valid != (err == nil) {
				t.Errorf("json.Valid says %v, heapEstimate %v", valid, err)
			}
		})
	}
}

func TestAllocSize(t *testing.T) {
	prev := int64(0)
	for n := range int64(100_000) {
		got := allocSize(n)
		if got < n || got < prev {
			t.Fatalf("allocSize(%d) = %d: below n or below allocSize(%d) = %d", n, got, n-1, prev)
		}
		prev = got
	}
}

// FuzzHeapEstimate: heapEstimate never panics, refuses exactly what json.Valid refuses, and never
// counts less than the same estimate taken from the value encoding/json decodes (treeEstimate): no
// container, member or string is missed or undercounted.
func FuzzHeapEstimate(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`, `[{},{},{}]`, "\"\xff\xed\xa0\x80\"",
		`{"a":1,"a":{"a":[]}}`, `"\ud83d\ude00\ud800x"`, `-1.5e-3`, nest(50), `{"a" : [ true , false ] }`, `[1,]`, `{"a"}`} {
		f.Add([]byte(s))
	}
	for _, s := range decodeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		est, err := heapEstimate(data)
		if valid := json.Valid(data); valid != (err == nil) {
			t.Fatalf("json.Valid %v, heapEstimate %v", valid, err)
		}
		if err != nil {
			return
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("valid JSON does not decode: %v", err)
		}
		if tree := treeEstimate(v); est < tree {
			t.Fatalf("heapEstimate %d, below %d estimated from the decoded value", est, tree)
		}
	})
}

// treeEstimate is heapEstimate's formula applied to a decoded value.
func treeEstimate(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		n := containerBytes(container{object: true, n: int64(len(v))})
		for k, x := range v {
			n += allocSize(int64(len(k))) + treeEstimate(x)
		}
		return n
	case []any:
		n := containerBytes(container{n: int64(len(v))})
		for _, x := range v {
			n += treeEstimate(x)
		}
		return n
	case string:
		return stringBytes + allocSize(int64(len(v)))
	case json.Number:
		return numberBytes
	default:
		return 0
	}
}
