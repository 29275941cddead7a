package probes

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

const fuzzMarker = "ZqXsecretXqZ"

// markValues replaces string values of the object by fuzzMarker where the mask says so (one bit per
// string, cycling), except those a message may name (replaceMasked).
func markValues(obj map[string]any, mask uint64) {
	replaceMasked(obj, mask, fuzzMarker, nil)
}

// replaceMasked replaces, where the mask says so (one bit per value, cycling), every string value of
// the object by str and, when num is not nil, every number by num, except the values a message may
// name: apiVersion, kind, metadata.name and metadata.namespace. With num nil, numbers stay and take
// no bit.
func replaceMasked(obj map[string]any, mask uint64, str string, num any) {
	i := 0
	pick := func() bool {
		bit := mask>>(i%64)&1 == 1
		i++
		return bit
	}
	var walk func(v any, path string) any
	walk = func(v any, path string) any {
		switch n := v.(type) {
		case map[string]any:
			for k, e := range n {
				n[k] = walk(e, path+"."+k)
			}
			return n
		case []any:
			for j, e := range n {
				n[j] = walk(e, path+".[]")
			}
			return n
		case string:
			switch path {
			case ".apiVersion", ".kind", ".metadata.name", ".metadata.namespace":
				return n
			}
			if pick() {
				return str
			}
			return n
		case int64, float64:
			if num != nil && pick() {
				return num
			}
			return v
		default:
			return v
		}
	}
	walk(obj, "")
}

func FuzzEvaluate(f *testing.F) {
	objs := []string{
		widget, gadget,
		`{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
		`{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":1}}`,
		`{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"True","observedGeneration":1}]}}`,
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"},"status":{"phase":"Active"}}`,
		`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"d","namespace":"s"},"status":{"phase":"Pending"}}`,
		`{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"name":"tls","namespace":"shop","generation":1},"status":{"conditions":[{"type":"Ready","status":"False"}]}}`,
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","labels":{"app":"x"}},"data":{"password":"aHVudGVyMg=="}}`,
		`{}`, `{"metadata":7,"status":[],"spec":null}`,
	}
	probeSets := []string{
		``,
		`[{"selector":{"type":"GroupKind","groupKind":{"group":"example.com","kind":"Widget"}},"assertions":[{"type":"ConditionEqual","conditionEqual":{"type":"Ready","status":"True"}},{"type":"FieldsEqual","fieldsEqual":{"fieldA":"spec.replicas","fieldB":"status.readyReplicas"}}]}]`,
		`[{"selector":{"type":"Label","label":{"matchLabels":{"app":"x"}}},"assertions":[{"type":"FieldValue","fieldValue":{"fieldPath":"data.password","value":"guess"}}]}]`,
		`[{"selector":{"type":"Label","label":{"matchExpressions":[{"key":"app","operator":"In","values":["shop","x"]}]}},"assertions":[{"type":"FieldValue","fieldValue":{"fieldPath":"status.phase","value":"Active"}}]}]`,
		`[{"selector":{"type":"Label","label":{"matchExpressions":[{"key":"app","operator":"Bogus"}]}},"assertions":[]},{"selector":{"type":"Other"}}]`,
		`[{"selector":{"type":"GroupKind","groupKind":{"group":"apps","kind":"Deployment"}},"assertions":[{"type":"Nope"}]}]`,
	}
	for i, o := range objs {
		f.Add([]byte(o), []byte(probeSets[i%len(probeSets)]), uint64(i)*0x9e3779b97f4a7c15)
	}
	f.Fuzz(func(t *testing.T, objJSON, probesJSON []byte, mask uint64) {
		obj := map[string]any{}
		var err error
		if mask&(1<<63) == 0 {
			err = utiljson.Unmarshal(objJSON, &obj) // integral numbers as int64, like a client
		} else {
			err = json.Unmarshal(objJSON, &obj) // every number a float64
		}
		if err != nil || obj == nil {
			return
		}
		var probes []olmv1.ProgressionProbe
		if json.Unmarshal(probesJSON, &probes) != nil {
			probes = nil
		}
		markValues(obj, mask)
		u := &unstructured.Unstructured{Object: obj}
		before := u.DeepCopy()

		got := Evaluate(u, probes)
		if again := Evaluate(u, probes); again != got {
			t.Fatalf("not deterministic: %+v then %+v", got, again)
		}
		if !reflect.DeepEqual(before.Object, u.Object) {
			t.Fatalf("Evaluate modified the object")
		}
		if got.Ready != (got.Message == "") {
			t.Fatalf("Ready %v with message %q", got.Ready, got.Message)
		}
		if !NeedsContent(u, probes) {
			// What NeedsContent promises: ready, and so for the object's metadata alone.
			if !got.Ready {
				t.Fatalf("needs no content, yet not ready: %s", got.Message)
			}
			if meta := metadataOnly(u); !Evaluate(meta, probes).Ready || NeedsContent(meta, probes) {
				t.Fatalf("needs no content, but its metadata alone is judged otherwise")
			}
		}
		if len(probes) == 0 {
			if again := Evaluate(u, nil); again != got {
				t.Fatalf("nil and empty probes differ: %+v and %+v", got, again)
			}
		}

		// The marker may only reach the message through what a message may name.
		named, _ := json.Marshal(probes)
		for _, path := range []string{"apiVersion", "kind", "metadata.name", "metadata.namespace"} {
			if s, ok := func() (string, bool) { v, ok := lookup(obj, path); s, _ := v.(string); return s, ok }(); ok {
				named = append(named, s...)
			}
		}
		if !strings.Contains(string(named), fuzzMarker) && strings.Contains(got.Message, fuzzMarker) {
			t.Fatalf("message carries an object value: %s", got.Message)
		}
	})
}

// Marks that no message text, field path or identity of the seeds contains: a message that shows
// either has echoed an object value (fmt's %q and %v and encoding/json all keep them as they are).
const (
	openMark    = "⟦"
	closeMark   = "⟧"
	numberValue = int64(731594286017)
)

// plantValues replaces, where the mask says so (one bit per value, cycling), every string value of
// the object by openMark+secret+closeMark and every number by numberValue, except the values a
// message may name (replaceMasked).
func plantValues(obj map[string]any, mask uint64, secret string) {
	replaceMasked(obj, mask, openMark+secret+closeMark, numberValue)
}

// FuzzMessagesCarryNoObjectValue checks the property the package promises: a Message never contains
// a value read from the object other than its kind, namespace, name and apiVersion. Random values
// (the fuzzed secret, between marks, and a marker number) are planted anywhere in random objects.
func FuzzMessagesCarryNoObjectValue(f *testing.F) {
	objs := []string{
		widget, gadget,
		`{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":2,"conditions":[{"type":"Available","status":"False"}]}}`,
		`{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":1}}`,
		`{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"False","observedGeneration":2}]}}`,
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","generation":1},"status":{"phase":"Terminating"}}`,
		`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"d","namespace":"s"},"status":{"phase":"Pending"}}`,
		`{"apiVersion":"cert-manager.io/v1","kind":"Issuer","metadata":{"name":"ca","namespace":"shop","generation":1},"status":{"conditions":[{"type":"Ready","status":"False"}]}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns","labels":{"app":"x"}},"data":{"foo":"foo","bar":{"baz":"q"}}}`,
	}
	probeSets := []string{
		``,
		`[{"selector":{"type":"GroupKind","groupKind":{"group":"example.com","kind":"Widget"}},"assertions":[{"type":"ConditionEqual","conditionEqual":{"type":"Ready","status":"True"}},{"type":"FieldsEqual","fieldsEqual":{"fieldA":"spec.replicas","fieldB":"status.readyReplicas"}},{"type":"FieldValue","fieldValue":{"fieldPath":"status.phase","value":"Done"}}]}]`,
		`[{"selector":{"type":"Label","label":{"matchLabels":{"app":"x"}}},"assertions":[{"type":"FieldValue","fieldValue":{"fieldPath":"data.foo","value":"bar"}},{"type":"FieldValue","fieldValue":{"fieldPath":"data.bar.baz","value":"q"}},{"type":"FieldsEqual","fieldsEqual":{"fieldA":"data.foo","fieldB":"data.bar"}}]}]`,
		`[{"selector":{"type":"Label","label":{}},"assertions":[{"type":"ConditionEqual","conditionEqual":{"type":"Available","status":"True"}},{"type":"FieldValue","fieldValue":{"fieldPath":"spec.replicas","value":"3"}}]}]`,
	}
	for i, o := range objs {
		f.Add([]byte(o), []byte(probeSets[i%len(probeSets)]), uint64(i)*0x9e3779b97f4a7c15, "s3cr3t")
		f.Add([]byte(o), []byte(probeSets[(i+1)%len(probeSets)]), ^uint64(0), "")
	}
	f.Fuzz(func(t *testing.T, objJSON, probesJSON []byte, mask uint64, secret string) {
		obj := map[string]any{}
		if err := utiljson.Unmarshal(objJSON, &obj); err != nil || obj == nil {
			return
		}
		var probes []olmv1.ProgressionProbe
		if json.Unmarshal(probesJSON, &probes) != nil {
			probes = nil
		}
		plantValues(obj, mask, secret)
		got := Evaluate(&unstructured.Unstructured{Object: obj}, probes)

		// What a message may name: the probes (paths, types, expected values, selectors) and the
		// object's identity.
		named, _ := json.Marshal(probes)
		for _, path := range []string{"apiVersion", "kind", "metadata.name", "metadata.namespace"} {
			v, _ := lookup(obj, path)
			s, _ := v.(string)
			named = append(named, s...)
		}
		for _, mark := range []string{openMark, closeMark, strconv.FormatInt(numberValue, 10)} {
			if !strings.Contains(string(named), mark) && strings.Contains(got.Message, mark) {
				t.Fatalf("message carries an object value (%q): %s", mark, got.Message)
			}
		}
	})
}
