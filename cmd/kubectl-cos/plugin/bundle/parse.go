// Package bundle turns plain Kubernetes manifests (multi-document YAML or JSON files, or a folder of
// them) into an inline ClusterObjectSet, as kubectl cos build does: objects sorted into the producer
// phase order (cmd/kubectl-cos/plugin/phasesort), namespaced objects without a namespace given one, phases over the
// API's limit split, optional progression probes, and the result validated with webhook/admission/validation.
//
// It is pure: callers read the files and pass their bytes. Every error about the input names the
// file, the line where the document starts, the document's number and the field, and never quotes a
// value of the input.
package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/cos-externalizer/cos-externalizer/internal/naming"
)

// Source is where an object was read.
type Source struct {
	// File is the name the caller gave the data ("-" for standard input).
	File string
	// Document is the number of the document in the file, from 1, counting as kubectl does: documents
	// are separated by lines starting with "---"; a leading separator opens no document.
	Document int
	// Line is the line of the file where the document's content starts (its first line that is not
	// blank or a comment), from 1.
	Line int
	// Item is the index of the object in the items of a List document, or -1.
	Item int
}

func (s Source) String() string {
	out := fmt.Sprintf("%s:%d: document %d", s.File, s.Line, s.Document)
	if s.Item >= 0 {
		out += fmt.Sprintf(", items[%d]", s.Item)
	}
	return out
}

// Object is one object of the input and where it was read.
type Object struct {
	Source Source
	Object *unstructured.Unstructured
}

// Error is one problem with the input: where (Source, and the object's kind and name when they are
// known), which field (a path inside the object, or empty), and what. It never quotes input values.
type Error struct {
	Source Source
	// Object is "<Kind> <namespace>/<name>" or "<Kind> <name>" when known.
	Object string
	// Field is the path of the field inside the object, e.g. metadata.name.
	Field string
	// Detail says what is wrong.
	Detail string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source.String())
	if e.Object != "" {
		b.WriteString(" (" + e.Object + ")")
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Detail)
	return b.String()
}

// Errors are all the problems found, in input order.
type Errors []error

func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = "  " + e.Error()
	}
	return fmt.Sprintf("%d problems:\n%s", len(es), strings.Join(parts, "\n"))
}

// Unwrap lets errors.As find each problem.
func (es Errors) Unwrap() []error { return es }

// orNil returns es as an error, or nil when it is empty.
func (es Errors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Parse reads every object of one multi-document YAML or JSON file: documents are split as kubectl
// splits them, empty ones (only whitespace, comments or null) are skipped, and the items of List
// documents (kind ending in "List" with an items list) are flattened. Every object has string
// apiVersion and kind and, if present, a metadata mapping. All problems are reported together, as
// Errors of *Error.
func Parse(file string, data []byte) ([]Object, error) {
	var out []Object
	var errs Errors
	for _, d := range splitDocuments(data) {
		src := Source{File: file, Document: d.number, Line: d.line, Item: -1}
		if d.badSeparator {
			errs = append(errs, &Error{Source: Source{File: file, Document: d.number, Line: d.line, Item: -1},
				Detail: "a document separator line may hold only \"---\" and a comment"})
			continue
		}
		objs, derrs := parseDocument(src, d.first, d.text)
		out = append(out, objs...)
		errs = append(errs, derrs...)
	}
	return out, errs.orNil()
}

// document is one document of a file.
type document struct {
	// line is where its content starts, first its first line (yaml counts from there).
	number, line, first int
	text                []byte
	badSeparator        bool
}

// splitDocuments splits data into documents the way k8s.io/apimachinery's YAMLReader does: a line
// that starts with "---" ends the current document (if it has any bytes) and may be followed only by
// spaces and a comment.
func splitDocuments(data []byte) []document {
	var out []document
	var cur bytes.Buffer
	start, first := 1, 1 // where cur's content starts (else its first line), and its first line
	contentSeen := false // whether cur has a line that is not blank or a comment
	number := 0
	flush := func() {
		if cur.Len() > 0 {
			number++
			out = append(out, document{number: number, line: start, first: first, text: bytes.Clone(cur.Bytes())})
			cur.Reset()
		}
		contentSeen = false
	}
	line := 0
	for len(data) > 0 {
		line++
		i := bytes.IndexByte(data, '\n')
		var l []byte
		if i < 0 {
			l, data = data, nil
		} else {
			l, data = data[:i+1], data[i+1:]
		}
		if bytes.HasPrefix(l, []byte("---")) {
			rest := strings.TrimSpace(string(l[3:]))
			flush()
			if rest != "" && rest[0] != '#' {
				number++
				out = append(out, document{number: number, line: line, badSeparator: true})
			}
			start = line + 1
			continue
		}
		if cur.Len() == 0 {
			start, first = line, line
		}
		if t := bytes.TrimSpace(l); !contentSeen && len(t) > 0 && t[0] != '#' {
			start, contentSeen = line, true
		}
		cur.Write(l)
	}
	flush()
	return out
}

// yamlLine matches the line number of a YAML parser error, which counts from the document's start.
var yamlLine = regexp.MustCompile(`^(?:error converting YAML to JSON: )?yaml: line (\d+): (.*)$`)

// parseDocument parses one document into its objects. A document that is a JSON object is parsed as
// JSON, as kubectl parses it (integers as int64, other numbers as float64, much faster than through
// YAML); anything else as YAML.
func parseDocument(src Source, first int, text []byte) ([]Object, Errors) {
	if t := bytes.TrimSpace(text); len(t) > 0 && t[0] == '{' {
		var obj map[string]any
		if err := utiljson.Unmarshal(t, &obj); err == nil && obj != nil {
			return objectsOf(src, obj)
		}
		// Not valid JSON: the YAML parser may still read it, or says where it is wrong.
	}
	j, err := yaml.YAMLToJSON(text)
	if err != nil {
		detail := "not valid YAML"
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			detail = fmt.Sprintf("not valid YAML: line %d: %s", first+n-1, m[2])
		} else if !strings.ContainsAny(msg, "`\"'\n") {
			// Messages that could quote the input are left out.
			detail += ": " + strings.TrimPrefix(msg, "yaml: ")
		}
		return nil, Errors{&Error{Source: src, Detail: detail}}
	}
	j = bytes.TrimSpace(j)
	if len(j) == 0 || bytes.Equal(j, []byte("null")) {
		return nil, nil
	}
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		// YAMLToJSON gives valid JSON; this is not expected. The parser's message may quote input.
		return nil, Errors{&Error{Source: src, Detail: "not valid JSON"}}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, Errors{&Error{Source: src, Detail: fmt.Sprintf("the document is %s, not an object (a mapping with apiVersion, kind and metadata)", typeName(v))}}
	}
	return objectsOf(src, obj)
}

// objectsOf returns the object of a document, or the items of a List.
func objectsOf(src Source, obj map[string]any) ([]Object, Errors) {
	if items, isList := listItems(obj); isList {
		var out []Object
		var errs Errors
		for i, item := range items {
			isrc := src
			isrc.Item = i
			m, ok := item.(map[string]any)
			if !ok {
				errs = append(errs, &Error{Source: isrc, Detail: fmt.Sprintf("the item is %s, not an object", typeName(item))})
				continue
			}
			if o, err := checkObject(isrc, m); err != nil {
				errs = append(errs, err)
			} else {
				out = append(out, o)
			}
		}
		return out, errs
	}
	o, err := checkObject(src, obj)
	if err != nil {
		return nil, Errors{err}
	}
	return []Object{o}, nil
}

// listItems returns the items of a List document (kind ending in "List", with an items list).
func listItems(obj map[string]any) ([]any, bool) {
	kind, _ := obj["kind"].(string)
	items, ok := obj["items"].([]any)
	if !strings.HasSuffix(kind, "List") || !ok {
		return nil, false
	}
	return items, true
}

// checkObject checks what every object needs before it can be sorted into a phase: apiVersion and
// kind strings, metadata a mapping. The rest is webhook/admission/validation's.
func checkObject(src Source, m map[string]any) (Object, error) {
	u := &unstructured.Unstructured{Object: m}
	for _, f := range []string{"apiVersion", "kind"} {
		v, ok := m[f]
		switch s, isString := v.(string); {
		case !ok || v == nil:
			return Object{}, &Error{Source: src, Object: errorObject(u), Field: f, Detail: "Required value"}
		case !isString:
			return Object{}, &Error{Source: src, Object: errorObject(u), Field: f, Detail: fmt.Sprintf("Invalid value: must be a string, not %s", typeName(v))}
		case s == "":
			return Object{}, &Error{Source: src, Object: errorObject(u), Field: f, Detail: "Required value"}
		}
	}
	if md, ok := m["metadata"]; ok && md != nil {
		if _, ok := md.(map[string]any); !ok {
			return Object{}, &Error{Source: src, Object: errorObject(u), Field: "metadata", Detail: fmt.Sprintf("Invalid value: must be a mapping, not %s", typeName(md))}
		}
	}
	return Object{Source: src, Object: u}, nil
}

// errorObject names u for an Error: empty when u has neither a kind nor a name (the Error then names
// only its source), else as everywhere (naming.Object).
func errorObject(u *unstructured.Unstructured) string {
	kind, _ := u.Object["kind"].(string)
	md, _ := u.Object["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if kind == "" && name == "" {
		return ""
	}
	return naming.Object(u.Object)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("a %T", v)
}

// ErrNoObjects means the input held no object.
var ErrNoObjects = errors.New("no objects in the input")
