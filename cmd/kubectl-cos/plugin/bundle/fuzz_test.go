package bundle

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzParse checks the manifest reader on arbitrary input: it never panics; every problem is an
// *Error naming the file, a document and a line within the input; every object has string apiVersion
// and kind; and the objects read back the same from their own YAML (nothing is lost or invented).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\ndata: {k: v}\n",
		"---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- 3\n",
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"dg=="}}`,
		"kind: A\n--- # c\n- a\n---x\n--- {a: b}\n",
		"a: [1, 2\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: 3\n",
		"\t\x00\xff---",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Parse("in.yaml", data)
		lines := strings.Count(string(data), "\n") + 1
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T is not Errors: %v", err, err)
			}
			for _, e := range es {
				var pe *Error
				if !errors.As(e, &pe) {
					t.Fatalf("problem %T is not an *Error: %v", e, e)
				}
				if pe.Source.File != "in.yaml" || pe.Source.Document < 1 || pe.Source.Line < 1 || pe.Source.Line > lines {
					t.Fatalf("problem at %+v (input of %d lines)", pe.Source, lines)
				}
			}
		}
		for _, o := range objs {
			if o.Object.GetAPIVersion() == "" || o.Object.GetKind() == "" {
				t.Fatalf("object without apiVersion or kind at %s", o.Source)
			}
			if o.Source.Line < 1 || o.Source.Line > lines {
				t.Fatalf("object at line %d of %d", o.Source.Line, lines)
			}
			b, err := yaml.Marshal(o.Object.Object)
			if err != nil {
				t.Fatalf("object at %s does not marshal: %v", o.Source, err)
			}
			again, err := Parse("again.yaml", b)
			if err != nil || len(again) != 1 {
				// A List's item may itself look like a List; skip those.
				if _, isList := listItems(o.Object.Object); isList {
					continue
				}
				t.Fatalf("object at %s does not read back from its YAML: %v (%d objects)", o.Source, err, len(again))
			}
			want, _ := json.Marshal(o.Object.Object)
			got, _ := json.Marshal(again[0].Object.Object)
			if string(want) != string(got) {
				t.Fatalf("object at %s reads back differently:\n%s\n%s", o.Source, want, got)
			}
		}
	})
}
