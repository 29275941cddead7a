package drift

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzOwned: an object holding the managedFields an apply of desired records is unchanged; taking
// any one field from us (the API server drops a parent left without fields) makes it changed; and
// no live object, however malformed, makes Owned fail.
func FuzzOwned(f *testing.F) {
	f.Add(`{"apiVersion":"v1","metadata":{"name":"x","labels":{"a":"b"}},"spec":{"a":{"b":1,"c":[1,2]},"d":"x"}}`, `{}`, uint(3))
	f.Add(`{"apiVersion":"v1","spec":{"l":[{"n":"x"}]}}`, `{"metadata":{"managedFields":[{"manager":"cos-externalizer","operation":"Apply","apiVersion":"v1","fieldsV1":{"f:spec":{"f:l":{"k:{\"n\":\"x\"}":{},"v:1":{},"k:[":{}}}}}]}}`, uint(0))
	f.Add(`{"metadata":{"annotations":{}},"data":{"":null}}`, `{"metadata":{"managedFields":[{"manager":"cos-externalizer","operation":"Apply","fieldsV1":{"f:data":{}}}]}}`, uint(1))
	f.Fuzz(func(t *testing.T, ds, ls string, pick uint) {
		var d, l map[string]any
		if json.Unmarshal([]byte(ds), &d) != nil || d == nil {
			return
		}
		if json.Unmarshal([]byte(ls), &l) == nil && l != nil {
			whole := Owned(d, l, fieldManager) // must not panic
			// On the metadata alone: the same verdict, unless deferred to the content.
			if v, deferred := owned(d, metadataOnly(l), fieldManager, true); !deferred && v != whole {
				t.Fatalf("on the metadata %+v, on the whole object %+v", v, whole)
			} else if deferred && !v.Unchanged {
				t.Fatalf("deferred to the content after a verdict: %+v", v)
			}
		}
		d = normalize(d).(map[string]any)
		fields := fieldsOf(d)
		if v := Owned(d, withFields(d, fields), fieldManager); !v.Unchanged {
			t.Fatalf("as applied: %+v", v)
		}
		leaves := leafPaths(fields, nil)
		if len(leaves) == 0 {
			return
		}
		taken := deepCopy(fields).(map[string]any)
		remove(taken, leaves[pick%uint(len(leaves))])
		if v := Owned(d, withFields(d, taken), fieldManager); v.Unchanged {
			t.Fatalf("%v taken, still unchanged", leaves[pick%uint(len(leaves))])
		}
	})
}

// leafPaths lists the paths of the nodes without children, in order.
func leafPaths(node map[string]any, prefix []string) [][]string {
	keys := make([]string, 0, len(node))
	for k := range node {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out [][]string
	for _, k := range keys {
		p := append(slices.Clone(prefix), k)
		if c, _ := node[k].(map[string]any); len(c) > 0 {
			out = append(out, leafPaths(c, p)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// remove deletes the node at path and the parents it leaves empty, as server-side apply does.
func remove(node map[string]any, path []string) {
	if len(path) == 1 {
		delete(node, path[0])
		return
	}
	c := node[path[0]].(map[string]any)
	remove(c, path[1:])
	if len(c) == 0 {
		delete(node, path[0])
	}
}
