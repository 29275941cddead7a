package drift

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
)

// Annotation is carried by every object the reconciler applies: Digest of the desired object it
// applied (without the annotation). Removing or changing it is drift like any other field.
const Annotation = "cos-externalizer.io/applied-digest"

// Digest is the value of Annotation for the canonical bytes of a desired object.
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Reasons a live object is not known to be unchanged; the values are metric labels.
const (
	// ReasonDigest: the object does not carry the digest of the desired object in Annotation (never
	// applied by us, applied from another desired object, or the annotation was changed).
	ReasonDigest = "digest"
	// ReasonManagedFields: no managedFields entry of ours, or one that cannot be read.
	ReasonManagedFields = "managed-fields"
	// ReasonField: a field of the desired object is no longer ours.
	ReasonField = "field"
)

// Verdict says whether a live object holds what the desired object says, and if not, why.
type Verdict struct {
	Unchanged bool
	// Reason is one of the Reason constants when not Unchanged.
	Reason string
	// Field is the path of the field that decided ReasonField, with list elements by their index in
	// the desired object (never a value: paths may be logged).
	Field string
}

// Unchanged decides, from the live object alone, whether applying desired (as manager, with
// server-side apply) would change nothing: live carries digest in Annotation, and manager's Apply
// entry of live's managedFields still owns every field of desired (Owned). Server-side apply
// moves a field to whoever changes it with an update or a forced apply, and drops it from every
// manager when it is removed: a field we still own holds what we last applied there, and digest says
// that was desired. No value is compared, so the API server's normalizations never look like drift.
// digest must be Digest of desired without Annotation; desired may hold it.
func Unchanged(desired, live map[string]any, manager, digest string) Verdict {
	md, _ := live["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if got, _ := ann[Annotation].(string); got != digest {
		return Verdict{Reason: ReasonDigest}
	}
	return Owned(desired, live, manager)
}

// UnchangedMetadata is Unchanged for a live object known by its apiVersion, kind and metadata alone
// (a metadata-only cache): the digest and every field's owner are in its metadata, but where our entry
// owns a non-empty map or list outside metadata as a whole, Unchanged also looks at live's value
// there. When the metadata says nothing changed but such a field exists, needsContent is true and
// the verdict is not Unchanged: it is Unchanged of the whole object that decides. When it is false,
// the verdict is the one Unchanged gives for the whole object.
func UnchangedMetadata(desired, live map[string]any, manager, digest string) (v Verdict, needsContent bool) {
	md, _ := live["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if got, _ := ann[Annotation].(string); got != digest {
		return Verdict{Reason: ReasonDigest}, false
	}
	v, deferred := owned(desired, live, manager, true)
	if v.Unchanged && deferred {
		return Verdict{Reason: ReasonField}, true
	}
	return v, false
}

// Owned reports whether manager's Apply entry of live's managedFields owns every field desired sets.
// It walks the entry's fieldsV1 without a schema: "f:<name>" for map keys; for list elements that
// are maps, the one "k:{...}" entry whose key fields equal the element's (a key field the element
// lacks was defaulted by the API server and matches); "v:<value>" for elements of set lists. A node
// without children owns its value as a whole (atomic maps and lists), unless another manager owns
// a field below it or a field of desired (but a null or an empty map or list) is missing from live
// below it: server-side apply keeps such a node of ours when others take or remove all its
// children. Fields the API server never
// records (apiVersion, kind, status, metadata.name and the server's metadata) are not looked at.
// Anything it cannot match is "not owned": an extra apply is safe, a skipped one is not.
func Owned(desired, live map[string]any, manager string) Verdict {
	v, _ := owned(desired, live, manager, false)
	return v
}

// owned is Owned; with metadataOnly, the fields outside metadata that our entry owns as a whole are
// not looked for in live, and deferred says whether there were any.
func owned(desired, live map[string]any, manager string, metadataOnly bool) (v Verdict, deferred bool) {
	entries, ok := managedFields(live)
	if !ok {
		return Verdict{Reason: ReasonManagedFields}, false
	}
	var ours map[string]any
	var others []map[string]any
	apiVersion, _ := desired["apiVersion"].(string)
	for _, e := range entries {
		fields, _ := e["fieldsV1"].(map[string]any)
		if e["manager"] == manager && e["operation"] == "Apply" && isEmpty(e["subresource"]) {
			if ours != nil || fields == nil || e["apiVersion"] != apiVersion {
				return Verdict{Reason: ReasonManagedFields}, false
			}
			ours = fields
			continue
		}
		if fields != nil {
			others = append(others, fields)
		}
	}
	if ours == nil {
		return Verdict{Reason: ReasonManagedFields}, false
	}
	w := owner{others: others, metadataOnly: metadataOnly}
	if !w.object(desired, ours, live, 0) {
		return Verdict{Reason: ReasonField, Field: w.where()}, false
	}
	return Verdict{Unchanged: true}, w.deferred
}

func isEmpty(v any) bool { s, ok := v.(string); return v == nil || (ok && s == "") }

// managedFields returns live's managedFields entries as maps; false if they are not all maps.
func managedFields(live map[string]any) ([]map[string]any, bool) {
	md, _ := live["metadata"].(map[string]any)
	list, _ := md["managedFields"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		out = append(out, m)
	}
	return out, true
}

// stripped are the fields the API server leaves out of managedFields, by depth: top level and
// metadata.
var (
	strippedTop      = map[string]bool{"apiVersion": true, "kind": true, "status": true}
	strippedMetadata = map[string]bool{
		"name": true, "namespace": true, "creationTimestamp": true, "selfLink": true, "uid": true,
		"clusterName": true, "generation": true, "managedFields": true, "resourceVersion": true,
	}
)

// onlyStripped reports whether desired metadata holds no field the API server records.
func onlyStripped(metadata any) bool {
	m, ok := metadata.(map[string]any)
	if !ok {
		return false
	}
	for k := range m {
		if !strippedMetadata[k] {
			return false
		}
	}
	return true
}

// owner walks desired against our fieldsV1. path holds the fieldsV1 keys from the root to the
// node looked at (to find the same node in the other managers' entries), shown the elements of
// desired's path for the verdict.
type owner struct {
	others []map[string]any
	path   []string
	shown  []string
	// metadataOnly: live holds metadata alone; a whole field outside it is deferred, not looked at.
	metadataOnly, deferred bool
}

func (w *owner) push(key, shown string) {
	w.path = append(w.path, key)
	w.shown = append(w.shown, shown)
}
func (w *owner) pop() { w.path = w.path[:len(w.path)-1]; w.shown = w.shown[:len(w.shown)-1] }

func (w *owner) where() string {
	var b strings.Builder
	for _, s := range w.shown {
		if b.Len() > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// object checks the fields of a desired map against node, the children of our fieldsV1 at it.
// depth 0 is the object itself, 1 its metadata.
func (w *owner) object(desired, node map[string]any, live any, depth int) bool {
	lm, _ := live.(map[string]any)
	for k, v := range desired {
		if (depth == 0 && strippedTop[k]) || (depth == 1 && strippedMetadata[k]) {
			continue
		}
		if depth == 0 && k == "metadata" && onlyStripped(v) {
			continue // the API server records none of it
		}
		w.push("f:"+k, k)
		child, ok := node["f:"+k].(map[string]any)
		if !ok {
			return false
		}
		next := -1
		if depth == 0 && k == "metadata" {
			next = 1
		}
		if !w.value(v, child, lm[k], next) {
			return false
		}
		w.pop()
	}
	return true
}

// value checks one desired value whose node of ours is node (which exists).
func (w *owner) value(desired any, node map[string]any, live any, depth int) bool {
	switch d := desired.(type) {
	case map[string]any:
		if len(d) == 0 {
			return true
		}
		if !hasChildren(node) {
			return w.whole(d, live)
		}
		return w.object(d, node, live, depth)
	case []any:
		if len(d) == 0 {
			return true
		}
		if !hasChildren(node) {
			return w.whole(d, live)
		}
		return w.list(d, node, live)
	}
	return true // a scalar or null: the node is the field
}

// list checks the elements of a desired list against the children of a granular list node.
func (w *owner) list(desired []any, node map[string]any, live any) bool {
	ll, _ := live.([]any)
	keys, keysOK := listKeys(node)
	claimed := map[string]bool{} // keys an element has every field of
	for _, e := range desired {
		if m, ok := e.(map[string]any); ok {
			for _, k := range keys {
				if had, ok := keyMatch(m, k.fields); ok && had == len(k.fields) {
					claimed[k.raw] = true
				}
			}
		}
	}
	for i, e := range desired {
		shown := "[" + strconv.Itoa(i) + "]"
		switch e := e.(type) {
		case map[string]any:
			k, ok := matchKey(e, keys, claimed)
			w.push(k.raw, shown)
			if !ok || !keysOK {
				return false
			}
			if !w.value(e, k.child, liveElement(ll, k.fields), -1) {
				return false
			}
			w.pop()
		case []any:
			w.push("", shown)
			return false // lists of lists have no keys: not matched
		default:
			w.push("", shown)
			if !hasValue(node, e) {
				return false
			}
			w.pop()
		}
	}
	return true
}

// whole checks a desired non-empty map or list that our node owns as a whole: no other manager owns
// a field below it, and live holds every part of it that the API server keeps.
func (w *owner) whole(desired, live any) bool {
	for _, o := range w.others {
		n := o
		for _, k := range w.path {
			if n, _ = n[k].(map[string]any); n == nil {
				break
			}
		}
		if n != nil && hasChildren(n) {
			return false
		}
	}
	if w.metadataOnly && (len(w.path) == 0 || w.path[0] != "f:metadata") {
		w.deferred = true
		return true
	}
	return present(desired, live)
}

// present reports whether live holds every part of desired but nulls and empty maps and lists
// (which the API server drops from typed objects): map keys, and list elements by position.
func present(desired, live any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		for k, v := range d {
			if droppable(v) {
				continue
			}
			if !ok || !present(v, l[k]) {
				return false
			}
		}
		return true
	case []any:
		if len(d) == 0 {
			return true
		}
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return false
		}
		for i := range d {
			if !present(d[i], l[i]) {
				return false
			}
		}
		return true
	}
	return live != nil
}

func droppable(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// hasChildren reports whether a node has children besides "." (itself).
func hasChildren(node map[string]any) bool {
	for k := range node {
		if k != "." {
			return true
		}
	}
	return false
}

// listKey is a "k:" child of a list node, decoded.
type listKey struct {
	raw    string
	fields map[string]any
	child  map[string]any
}

// listKeys decodes the "k:" children of node; false if one cannot be read.
func listKeys(node map[string]any) ([]listKey, bool) {
	var keys []listKey
	for k, v := range node {
		if !strings.HasPrefix(k, "k:") {
			continue
		}
		fields, err := decodeKey(k[2:])
		child, isMap := v.(map[string]any)
		if err != nil || !isMap || len(fields) == 0 {
			return nil, false
		}
		keys = append(keys, listKey{raw: k, fields: fields, child: child})
	}
	return keys, true
}

// matchKey finds the key of a desired element: the one whose every field the element has, equal;
// else the only one whose fields the element has are equal, the others having been defaulted by the
// API server (a port's protocol), and that no other element has every field of.
func matchKey(elem map[string]any, keys []listKey, claimed map[string]bool) (listKey, bool) {
	var found []listKey
	for _, k := range keys {
		had, ok := keyMatch(elem, k.fields)
		switch {
		case !ok:
		case had == len(k.fields):
			return k, true
		case had > 0 && !claimed[k.raw]:
			found = append(found, k)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return listKey{}, false
}

// keyMatch reports whether every key field the element has equals the key's, and how many it has.
func keyMatch(elem, fields map[string]any) (had int, ok bool) {
	for f, want := range fields {
		got, present := elem[f]
		if !present {
			continue
		}
		if !scalarEqual(got, want) {
			return 0, false
		}
		had++
	}
	return had, true
}

// liveElement returns the element of a live list whose fields equal every key field; nil if none.
func liveElement(live []any, fields map[string]any) any {
	for _, e := range live {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if had, ok := keyMatch(m, fields); ok && had == len(fields) {
			return m
		}
	}
	return nil
}

// hasValue reports whether node has the "v:" child of a scalar.
func hasValue(node map[string]any, v any) bool {
	for k := range node {
		if !strings.HasPrefix(k, "v:") {
			continue
		}
		var got any
		d := json.NewDecoder(strings.NewReader(k[2:]))
		d.UseNumber()
		if d.Decode(&got) == nil && scalarEqual(v, got) {
			return true
		}
	}
	return false
}

func decodeKey(s string) (map[string]any, error) {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	err := d.Decode(&m)
	return m, err
}

// scalarEqual compares a value of an object (int64, float64, string, bool, nil) with one decoded
// from fieldsV1 with UseNumber. Other types never match.
func scalarEqual(v, key any) bool {
	switch k := key.(type) {
	case json.Number:
		switch v := v.(type) {
		case int64:
			i, err := k.Int64()
			return err == nil && i == v
		case float64:
			f, err := k.Float64()
			return err == nil && f == v
		case json.Number:
			return v == k
		}
		return false
	case string, bool, nil:
		switch v.(type) {
		case string, bool, nil:
			return v == key
		}
	}
	return false
}
