package probes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// parse decodes JSON the way Kubernetes clients do: integral numbers become int64.
func parse(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := utiljson.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test object %s: %v", s, err)
	}
	return &unstructured.Unstructured{Object: m}
}

func ready() Result { return Result{Ready: true} }

func notReady(msg string) Result { return Result{Message: msg} }

const crdHead = `"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com","generation":2}`

const deployHead = `"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","generation":3}`

const stsHead = `"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db","namespace":"shop","generation":3}`

func TestBuiltins(t *testing.T) {
	tests := map[string]struct {
		obj  string
		want Result
	}{
		// CustomResourceDefinition.
		"crd established": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"NamesAccepted","status":"True"},{"type":"Established","status":"True"}]}}`,
			want: ready(),
		},
		"crd not established": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"False","reason":"Installing"}]}}`,
			want: notReady(`Object CustomResourceDefinition.apiextensions.k8s.io/v1 /widgets.example.com: .status.condition["Established"] is not True`),
		},
		"crd established unknown": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"Unknown"}]}}`,
			want: notReady(`Object CustomResourceDefinition.apiextensions.k8s.io/v1 /widgets.example.com: .status.condition["Established"] is not True`),
		},
		"crd without status": {
			obj:  `{` + crdHead + `}`,
			want: notReady("Object CustomResourceDefinition.apiextensions.k8s.io/v1 /widgets.example.com: missing .status.conditions"),
		},
		"crd with empty conditions": {
			obj:  `{` + crdHead + `,"status":{"conditions":[]}}`,
			want: notReady(`Object CustomResourceDefinition.apiextensions.k8s.io/v1 /widgets.example.com: missing .status.condition["Established"]`),
		},
		"crd conditions not a list": {
			obj:  `{` + crdHead + `,"status":{"conditions":{"type":"Established","status":"True"}}}`,
			want: notReady("Object CustomResourceDefinition.apiextensions.k8s.io/v1 /widgets.example.com: malformed .status.conditions"),
		},
		"crd condition entries of the wrong shape are skipped": {
			obj:  `{` + crdHead + `,"status":{"conditions":["Established",7,null,{"type":3},{"type":"Established","status":"True"}]}}`,
			want: ready(),
		},
		"crd condition status not a string": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":true}]}}`,
			want: notReady(`Object CustomResourceDefinition.apiextensions.k8s.io/v1 /widgets.example.com: .status.condition["Established"] is not True`),
		},
		"crd condition of an older generation does not count": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"True","observedGeneration":1}]}}`,
			want: notReady(`Object CustomResourceDefinition.apiextensions.k8s.io/v1 /widgets.example.com: .status.condition["Established"] outdated`),
		},
		"crd condition of the current generation counts": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"True","observedGeneration":2}]}}`,
			want: ready(),
		},
		"crd condition of a newer generation counts": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"True","observedGeneration":5}]}}`,
			want: ready(),
		},
		"crd condition with null observedGeneration counts": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"True","observedGeneration":null}]}}`,
			want: ready(),
		},
		"crd condition with invalid observedGeneration does not count": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"True","observedGeneration":"2"}]}}`,
			want: notReady(`Object CustomResourceDefinition.apiextensions.k8s.io/v1 /widgets.example.com: .status.condition["Established"] outdated`),
		},
		"crd condition observedGeneration ignored without metadata.generation": {
			obj:  `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"w"},"status":{"conditions":[{"type":"Established","status":"True","observedGeneration":1}]}}`,
			want: ready(),
		},
		"crd of another version of the group": {
			obj:  `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"CustomResourceDefinition","metadata":{"name":"w"}}`,
			want: notReady("Object CustomResourceDefinition.apiextensions.k8s.io/v1beta1 /w: missing .status.conditions"),
		},
		"crd kind in another group has no built-in probe": {
			obj:  `{"apiVersion":"example.com/v1","kind":"CustomResourceDefinition","metadata":{"name":"w"}}`,
			want: ready(),
		},

		// Namespace and PersistentVolumeClaim.
		"namespace active": {
			obj:  `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"},"status":{"phase":"Active"}}`,
			want: ready(),
		},
		"namespace terminating": {
			obj:  `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"},"status":{"phase":"Terminating"}}`,
			want: notReady(`Object Namespace.v1 /shop: value at key "status.phase" != "Active"; expected: "Active"`),
		},
		"namespace without phase": {
			obj:  `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"}}`,
			want: notReady(`Object Namespace.v1 /shop: missing key: "status.phase"`),
		},
		"namespace phase not a string": {
			obj:  `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"},"status":{"phase":1}}`,
			want: notReady(`Object Namespace.v1 /shop: value at key "status.phase" != "Active"; expected: "Active"`),
		},
		"namespace in a group has no built-in probe": {
			obj:  `{"apiVersion":"example.com/v1","kind":"Namespace","metadata":{"name":"shop"}}`,
			want: ready(),
		},
		"pvc bound": {
			obj:  `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"shop"},"status":{"phase":"Bound"}}`,
			want: ready(),
		},
		"pvc pending": {
			obj:  `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"shop"},"status":{"phase":"Pending"}}`,
			want: notReady(`Object PersistentVolumeClaim.v1 shop/data: value at key "status.phase" != "Bound"; expected: "Bound"`),
		},
		"pvc without status": {
			obj:  `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"shop"}}`,
			want: notReady(`Object PersistentVolumeClaim.v1 shop/data: missing key: "status.phase"`),
		},
		"pvc status not a map": {
			obj:  `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"shop"},"status":"Bound"}`,
			want: notReady(`Object PersistentVolumeClaim.v1 shop/data: error locating key "status.phase"`),
		},

		// Deployment.
		"deployment available": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"availableReplicas":3,"conditions":[{"type":"Progressing","status":"True"},{"type":"Available","status":"True"}]}}`,
			want: ready(),
		},
		"deployment default one replica": {
			obj:  `{` + deployHead + `,"spec":{},"status":{"observedGeneration":3,"replicas":1,"updatedReplicas":1,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: ready(),
		},
		"deployment scaled to zero": {
			obj:  `{` + deployHead + `,"spec":{"replicas":0},"status":{"observedGeneration":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: ready(),
		},
		"deployment with no status yet": {
			obj:  `{` + deployHead + `,"spec":{"replicas":2}}`,
			want: notReady("Object Deployment.apps/v1 shop/web: missing .status.conditions"),
		},
		"deployment default replicas with empty status": {
			obj:  `{` + deployHead + `}`,
			want: notReady("Object Deployment.apps/v1 shop/web: missing .status.conditions"),
		},
		"deployment rolling out": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":1,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: notReady(`Object Deployment.apps/v1 shop/web: "status.updatedReplicas" != "status.replicas"`),
		},
		"deployment missing updatedReplicas counts as zero": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: notReady(`Object Deployment.apps/v1 shop/web: "status.updatedReplicas" != "status.replicas"`),
		},
		"deployment surging": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":4,"updatedReplicas":4,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: notReady(`Object Deployment.apps/v1 shop/web: "status.replicas" != "spec.replicas"`),
		},
		"deployment not available": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"False","message":"Deployment does not have minimum availability."}]}}`,
			want: notReady(`Object Deployment.apps/v1 shop/web: .status.condition["Available"] is not True`),
		},
		"deployment status of an older generation": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: notReady("Object Deployment.apps/v1 shop/web: .status outdated"),
		},
		"deployment status of an older generation hides other problems": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":1}}`,
			want: notReady("Object Deployment.apps/v1 shop/web: .status outdated"),
		},
		"deployment status ahead of metadata.generation": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":4,"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: notReady("Object Deployment.apps/v1 shop/web: .status outdated"),
		},
		"deployment observedGeneration not an integer": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":"3","replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: notReady("Object Deployment.apps/v1 shop/web: .status outdated"),
		},
		"deployment without observedGeneration is not gated": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: ready(),
		},
		"deployment without metadata.generation is not gated": {
			obj:  `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"},"spec":{"replicas":3},"status":{"observedGeneration":7,"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: ready(),
		},
		"deployment Available of an older generation": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True","observedGeneration":2}]}}`,
			want: notReady(`Object Deployment.apps/v1 shop/web: .status.condition["Available"] outdated`),
		},
		"deployment spec.replicas not an integer": {
			obj:  `{` + deployHead + `,"spec":{"replicas":"3"},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: notReady(`Object Deployment.apps/v1 shop/web: value at key "spec.replicas" is not an integer`),
		},
		"deployment status.replicas a fraction": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":2.5,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: notReady(`Object Deployment.apps/v1 shop/web: value at key "status.replicas" is not an integer`),
		},
		"deployment null spec.replicas defaults to one": {
			obj:  `{` + deployHead + `,"spec":{"replicas":null},"status":{"observedGeneration":3,"replicas":1,"updatedReplicas":1,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: ready(),
		},
		"deployment in extensions has no built-in probe": {
			obj:  `{"apiVersion":"extensions/v1beta1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"}}`,
			want: ready(),
		},

		// StatefulSet.
		"statefulset with Available true": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":2,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: ready(),
		},
		"statefulset with Available false ignores availableReplicas": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":2,"conditions":[{"type":"Available","status":"False"}]}}`,
			want: notReady(`Object StatefulSet.apps/v1 shop/db: .status.condition["Available"] is not True`),
		},
		"statefulset without Available uses availableReplicas": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":2}}`,
			want: ready(),
		},
		"statefulset without Available and too few available": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":1,"conditions":[{"type":"Other","status":"True"}]}}`,
			want: notReady(`Object StatefulSet.apps/v1 shop/db: "status.availableReplicas" != "spec.replicas"`),
		},
		"statefulset without status": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2}}`,
			want: notReady(`Object StatefulSet.apps/v1 shop/db: "status.replicas" != "spec.replicas" and "status.availableReplicas" != "spec.replicas"`),
		},
		"statefulset default replicas": {
			obj:  `{` + stsHead + `,"status":{"observedGeneration":3,"replicas":1,"updatedReplicas":1,"availableReplicas":1}}`,
			want: ready(),
		},
		"statefulset updating": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":1,"availableReplicas":2}}`,
			want: notReady(`Object StatefulSet.apps/v1 shop/db: "status.updatedReplicas" != "status.replicas"`),
		},
		"statefulset availableReplicas not an integer": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":[2]}}`,
			want: notReady(`Object StatefulSet.apps/v1 shop/db: value at key "status.availableReplicas" is not an integer`),
		},
		"statefulset stale status": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":2,"replicas":2,"updatedReplicas":2,"availableReplicas":2}}`,
			want: notReady("Object StatefulSet.apps/v1 shop/db: .status outdated"),
		},

		// cert-manager.
		"certificate ready": {
			obj:  `{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"name":"tls","namespace":"shop","generation":1},"status":{"conditions":[{"type":"Ready","status":"True","observedGeneration":1}]}}`,
			want: ready(),
		},
		"certificate not ready": {
			obj:  `{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"name":"tls","namespace":"shop","generation":1},"status":{"conditions":[{"type":"Ready","status":"False"}]}}`,
			want: notReady(`Object Certificate.cert-manager.io/v1 shop/tls: .status.condition["Ready"] is not True`),
		},
		"certificate Ready of an older generation": {
			obj:  `{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"name":"tls","namespace":"shop","generation":2},"status":{"conditions":[{"type":"Ready","status":"True","observedGeneration":1}]}}`,
			want: notReady(`Object Certificate.cert-manager.io/v1 shop/tls: .status.condition["Ready"] outdated`),
		},
		"issuer ready": {
			obj:  `{"apiVersion":"cert-manager.io/v1","kind":"Issuer","metadata":{"name":"ca","namespace":"shop"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`,
			want: ready(),
		},
		"issuer without status": {
			obj:  `{"apiVersion":"cert-manager.io/v1","kind":"Issuer","metadata":{"name":"ca","namespace":"shop"}}`,
			want: notReady("Object Issuer.cert-manager.io/v1 shop/ca: missing .status.conditions"),
		},
		"cluster issuer has no built-in probe": {
			obj:  `{"apiVersion":"cert-manager.io/v1","kind":"ClusterIssuer","metadata":{"name":"ca"}}`,
			want: ready(),
		},

		// Kinds without probes.
		"config map": {
			obj:  `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"shop"},"data":{"a":"b"}}`,
			want: ready(),
		},
		"empty object": {
			obj:  `{}`,
			want: ready(),
		},
		"malformed metadata": {
			obj:  `{"apiVersion":"v1","kind":"Namespace","metadata":"shop"}`,
			want: notReady(`Object Namespace.v1 /: missing key: "status.phase"`),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := parse(t, tc.obj)
			before := obj.DeepCopy()
			got := Evaluate(obj, nil)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Evaluate() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before.Object, obj.Object); diff != "" {
				t.Errorf("Evaluate() modified the object (-before +after):\n%s", diff)
			}
		})
	}
}

func TestEvaluateNil(t *testing.T) {
	if diff := cmp.Diff(notReady("no object to probe"), Evaluate(nil, nil)); diff != "" {
		t.Errorf("Evaluate(nil) mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ready(), Evaluate(&unstructured.Unstructured{}, nil)); diff != "" {
		t.Errorf("Evaluate(empty) mismatch (-want +got):\n%s", diff)
	}
}

// TestFloatNumbers covers objects decoded by encoding/json, where every number is a float64.
func TestFloatNumbers(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "generation": float64(3)},
		"spec":     map[string]any{"replicas": float64(2)},
		"status": map[string]any{
			"observedGeneration": float64(3), "replicas": int32(2), "updatedReplicas": int(2),
			"conditions": []any{map[string]any{"type": "Available", "status": "True", "observedGeneration": float64(3)}},
		},
	}}
	if diff := cmp.Diff(ready(), Evaluate(obj, nil)); diff != "" {
		t.Errorf("Evaluate() mismatch (-want +got):\n%s", diff)
	}
	obj.Object["metadata"].(map[string]any)["generation"] = float64(4)
	if diff := cmp.Diff(notReady("Object Deployment.apps/v1 shop/web: .status outdated"), Evaluate(obj, nil)); diff != "" {
		t.Errorf("Evaluate() mismatch (-want +got):\n%s", diff)
	}
}

func gkProbe(group, kind string, as ...olmv1.Assertion) olmv1.ProgressionProbe {
	return olmv1.ProgressionProbe{
		Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Group: group, Kind: kind}},
		Assertions: as,
	}
}

func labelProbe(sel metav1.LabelSelector, as ...olmv1.Assertion) olmv1.ProgressionProbe {
	return olmv1.ProgressionProbe{
		Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: sel},
		Assertions: as,
	}
}

func condEq(ctype, status string) olmv1.Assertion {
	return olmv1.Assertion{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: ctype, Status: status}}
}

func fieldsEq(a, b string) olmv1.Assertion {
	return olmv1.Assertion{Type: olmv1.AssertionTypeFieldsEqual, FieldsEqual: olmv1.FieldsEqualProbe{FieldA: a, FieldB: b}}
}

func fieldVal(path, value string) olmv1.Assertion {
	return olmv1.Assertion{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: path, Value: value}}
}

const widget = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","namespace":"shop","generation":4,"labels":{"app":"shop","tier":"backend"}},
 "spec":{"replicas":3,"size":"3","ratio":1.5,"whole":2.0,"enabled":true,"off":false,"big":9007199254740993,"neg":-7,
   "nested":{"a":[1,{"b":2}]},"nothing":null,"list":["x"],"empty":""},
 "status":{"observedGeneration":4,"readyReplicas":3,"phase":"Running","nested":{"a":[1.0,{"b":2}]},"float":3.0,
   "conditions":[{"type":"Ready","status":"True"},{"type":"Degraded","status":"False"},{"type":"Old","status":"True","observedGeneration":3}]}}`

const gadget = `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g1","generation":2},"status":{"observedGeneration":1}}`

func TestCustomProbes(t *testing.T) {
	badOp := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near", Values: []string{"shop"}}}}
	_, badOpErr := metav1.LabelSelectorAsSelector(&badOp)
	badKey := metav1.LabelSelector{MatchLabels: map[string]string{"not a key!": "x"}}
	_, badKeyErr := metav1.LabelSelectorAsSelector(&badKey)
	if badOpErr == nil || badKeyErr == nil {
		t.Fatal("test selectors are expected to be invalid")
	}

	tests := map[string]struct {
		obj    string
		probes []olmv1.ProgressionProbe
		want   Result
	}{
		// Selectors.
		"group kind match passing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", condEq("Ready", "True"))},
			want:   ready(),
		},
		"group kind match failing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", condEq("Ready", "False"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: .status.condition["Ready"] is not False`),
		},
		"group kind other group does not match": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("other.com", "Widget", condEq("Missing", "True"))},
			want:   ready(),
		},
		"group kind other kind does not match": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "widget", condEq("Missing", "True"))},
			want:   ready(),
		},
		"group kind core group": {
			obj:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}`,
			probes: []olmv1.ProgressionProbe{gkProbe("", "ConfigMap", fieldVal("data.k", "v"))},
			want:   ready(),
		},
		"group kind core group does not match a grouped kind": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("", "Widget", condEq("Missing", "True"))},
			want:   ready(),
		},
		"match labels match": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}, condEq("Missing", "True"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: missing .status.condition["Missing"]`),
		},
		"match labels all must match": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop", "tier": "frontend"}}, condEq("Missing", "True"))},
			want:   ready(),
		},
		"match labels on an object without labels": {
			obj:    gadget,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}, condEq("Missing", "True"))},
			want:   ready(),
		},
		"match expressions In": {
			obj: widget,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"backend", "db"}}}}, condEq("Missing", "True"))},
			want: notReady(`Object Widget.example.com/v1 shop/w1: missing .status.condition["Missing"]`),
		},
		"match expressions NotIn": {
			obj: widget,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"backend"}}}}, condEq("Missing", "True"))},
			want: ready(),
		},
		"match expressions Exists": {
			obj: widget,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpExists}}}, condEq("Missing", "True"))},
			want: notReady(`Object Widget.example.com/v1 shop/w1: missing .status.condition["Missing"]`),
		},
		"match expressions DoesNotExist": {
			obj: widget,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}}, condEq("Missing", "True"))},
			want: ready(),
		},
		"match expressions DoesNotExist on an unlabelled object": {
			obj: gadget,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}}, condEq("Missing", "True"))},
			want: notReady("Object Gadget.example.com/v1 /g1: .status outdated"),
		},
		"non-string label values are ignored": {
			obj: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"app":7}}}`,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpExists}}}, condEq("Missing", "True"))},
			want: ready(),
		},
		"invalid operator fails the probe": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{labelProbe(badOp, condEq("Ready", "True"))},
			want:   notReady("Object Widget.example.com/v1 shop/w1: progressionProbes[0].selector: invalid label selector: " + badOpErr.Error()),
		},
		"invalid key fails the probe even for objects without probes": {
			obj:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
			probes: []olmv1.ProgressionProbe{labelProbe(badKey, condEq("Ready", "True"))},
			want:   notReady("Object ConfigMap.v1 /c: progressionProbes[0].selector: invalid label selector: " + badKeyErr.Error()),
		},
		"unknown selector type fails the probe": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{{Selector: olmv1.ObjectSelector{Type: "Name"}, Assertions: []olmv1.Assertion{condEq("Ready", "True")}}},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: progressionProbes[0].selector: unknown selector type "Name"`),
		},
		"empty label selector matches everything": {
			obj:    gadget,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{}, condEq("Ready", "True"))},
			want:   notReady("Object Gadget.example.com/v1 /g1: .status outdated"),
		},

		// ConditionEqual.
		"condition False expected and found": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", condEq("Degraded", "False"))},
			want:   ready(),
		},
		"condition missing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", condEq("Synced", "True"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: missing .status.condition["Synced"]`),
		},
		"condition of an older generation": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", condEq("Old", "True"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: .status.condition["Old"] outdated`),
		},

		// FieldsEqual.
		"fields equal integers": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.replicas", "status.readyReplicas"))},
			want:   ready(),
		},
		"fields equal integer and integral float": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.replicas", "status.float"))},
			want:   ready(),
		},
		"fields equal nested values with normalized numbers": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.nested", "status.nested"))},
			want:   ready(),
		},
		"fields equal string and number differ": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.size", "spec.replicas"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: "spec.size" != "spec.replicas"`),
		},
		"fields equal fraction and integer differ": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.ratio", "spec.whole"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: "spec.ratio" != "spec.whole"`),
		},
		"fields equal first missing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.absent", "spec.replicas"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: "spec.absent" missing`),
		},
		"fields equal second missing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.replicas", "status.absent"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: "status.absent" missing`),
		},
		"fields equal both missing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("a.b", "c"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: "a.b" missing`),
		},
		"fields equal null is missing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.nothing", "spec.nothing"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: "spec.nothing" missing`),
		},
		"fields equal path through a scalar is missing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.replicas.value", "spec.replicas"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: "spec.replicas.value" missing`),
		},
		"fields equal path into a list is missing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldsEq("spec.list.0", "spec.list.0"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: "spec.list.0" missing`),
		},

		// FieldValue.
		"field value string": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("status.phase", "Running"))},
			want:   ready(),
		},
		"field value string mismatch": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("status.phase", "running"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: value at key "status.phase" != "running"; expected: "running"`),
		},
		"field value integer": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.replicas", "3"), fieldVal("spec.neg", "-7"), fieldVal("spec.big", "9007199254740993"))},
			want:   ready(),
		},
		"field value integral float renders as an integer": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.whole", "2"), fieldVal("status.float", "3"))},
			want:   ready(),
		},
		"field value fraction": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.ratio", "1.5"))},
			want:   ready(),
		},
		"field value integer does not render with a decimal point": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.replicas", "3.0"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: value at key "spec.replicas" != "3.0"; expected: "3.0"`),
		},
		"field value booleans": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.enabled", "true"), fieldVal("spec.off", "false"))},
			want:   ready(),
		},
		"field value boolean is lower case": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.enabled", "True"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: value at key "spec.enabled" != "True"; expected: "True"`),
		},
		"field value empty string": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.empty", ""))},
			want:   ready(),
		},
		"field value of a map never matches": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.nested", "map[a:[1 map[b:2]]]"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: value at key "spec.nested" != "map[a:[1 map[b:2]]]"; expected: "map[a:[1 map[b:2]]]"`),
		},
		"field value of a list never matches": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.list", "[x]"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: value at key "spec.list" != "[x]"; expected: "[x]"`),
		},
		"field value missing": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("status.absent", "x"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: missing key: "status.absent"`),
		},
		"field value null": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", fieldVal("spec.nothing", "null"))},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: missing key: "spec.nothing"`),
		},
		"unknown assertion type": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", olmv1.Assertion{Type: "Regex"})},
			want:   notReady(`Object Widget.example.com/v1 shop/w1: progressionProbes[0].assertions[0]: unknown assertion type "Regex"`),
		},

		// Several probes, and probes together with built-in ones.
		"several probes report in order": {
			obj: widget,
			probes: []olmv1.ProgressionProbe{
				gkProbe("example.com", "Gadget", condEq("Nope", "True")),
				gkProbe("example.com", "Widget", condEq("Ready", "True"), fieldVal("status.phase", "Done")),
				labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}, fieldsEq("spec.replicas", "spec.neg")),
			},
			want: notReady(`Object Widget.example.com/v1 shop/w1: value at key "status.phase" != "Done"; expected: "Done" and "spec.replicas" != "spec.neg"`),
		},
		"probe without assertions passes": {
			obj:    widget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget")},
			want:   ready(),
		},
		"custom probe gated by generation": {
			obj:    gadget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Gadget", fieldVal("status.observedGeneration", "1"))},
			want:   notReady("Object Gadget.example.com/v1 /g1: .status outdated"),
		},
		"non-matching probe does not gate": {
			obj:    gadget,
			probes: []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", condEq("Ready", "True"))},
			want:   ready(),
		},
		"built-in and custom probes both run": {
			obj: `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"readyReplicas":2,"conditions":[{"type":"Available","status":"False"}]}}`,
			probes: []olmv1.ProgressionProbe{
				gkProbe("apps", "Deployment", fieldsEq("spec.replicas", "status.readyReplicas")),
			},
			want: notReady(`Object Deployment.apps/v1 shop/web: .status.condition["Available"] is not True and "spec.replicas" != "status.readyReplicas"`),
		},
		"custom probe on a ready built-in kind": {
			obj:    `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","labels":{"team":"a"}},"status":{"phase":"Active"}}`,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}, fieldVal("metadata.name", "shop"))},
			want:   ready(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := parse(t, tc.obj)
			before := obj.DeepCopy()
			got := Evaluate(obj, tc.probes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Evaluate() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before.Object, obj.Object); diff != "" {
				t.Errorf("Evaluate() modified the object (-before +after):\n%s", diff)
			}
		})
	}
}

// TestMessagesCarryNoValues puts a marker into every value of objects of every probed kind and checks
// that no message ever repeats it, whatever the probes.
func TestMessagesCarryNoValues(t *testing.T) {
	const marker = "SeCrEtMaRkEr"
	const markerNumber = "987654321"
	kinds := probedKinds
	bodies := []string{
		// Everything is the marker.
		`"spec":{"replicas":"` + marker + `","password":"` + marker + `"},
		 "data":{"password":"` + marker + `"},
		 "status":{"phase":"` + marker + `","observedGeneration":"` + marker + `","replicas":"` + marker + `","updatedReplicas":"` + marker + `",
		   "availableReplicas":"` + marker + `",
		   "conditions":[{"type":"Available","status":"` + marker + `","reason":"` + marker + `","message":"` + marker + `","observedGeneration":"` + marker + `"},
		                 {"type":"Ready","status":"` + marker + `","message":"` + marker + `"},
		                 {"type":"Established","status":"` + marker + `","message":"` + marker + `"}]}`,
		// Numbers are the marker number, and the status is current.
		`"spec":{"replicas":` + markerNumber + `,"password":` + markerNumber + `},
		 "status":{"phase":` + markerNumber + `,"observedGeneration":5,"replicas":` + markerNumber + `1,"updatedReplicas":` + markerNumber + `2,
		   "availableReplicas":` + markerNumber + `3,
		   "conditions":[{"type":"Available","status":"False","message":"` + marker + `","observedGeneration":` + markerNumber + `},
		                 {"type":"Ready","status":"False","message":"` + marker + `"}]}`,
		// Stale status.
		`"status":{"observedGeneration":` + markerNumber + `,"phase":"` + marker + `"}`,
		// Structured values.
		`"spec":{"replicas":{"v":"` + marker + `"},"password":["` + marker + `"]},"status":{"phase":{"v":"` + marker + `"},"conditions":"` + marker + `"}`,
	}
	probes := []olmv1.ProgressionProbe{
		labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": marker}},
			condEq("Available", "True"), condEq("Ready", "False"), condEq("Established", "True"), condEq("Absent", "True"),
			fieldsEq("spec.password", "data.password"), fieldsEq("spec.replicas", "status.replicas"), fieldsEq("spec.password", "absent"),
			fieldVal("spec.password", "other"), fieldVal("spec.replicas", "1"), fieldVal("data.password", "x"), fieldVal("status.phase", "Active"),
			fieldVal("status", "x"), fieldVal("metadata.annotations.note", "x"),
		),
		gkProbe("", "Secret", fieldVal("data.password", "guess"), fieldsEq("data.password", "spec.password")),
	}
	for _, k := range kinds {
		for i, body := range bodies {
			src := `{"apiVersion":"` + k.apiVersion + `","kind":"` + k.kind + `",
			  "metadata":{"name":"n","namespace":"ns","generation":5,"labels":{"app":"` + marker + `"},"annotations":{"note":"` + marker + `"}},` + body + `}`
			obj := parse(t, src)
			for _, ps := range [][]olmv1.ProgressionProbe{nil, probes} {
				got := Evaluate(obj, ps)
				if got.Ready && ps != nil {
					t.Errorf("%s body %d with %d probes: unexpectedly ready", k.kind, i, len(ps))
				}
				if strings.Contains(got.Message, marker) || strings.Contains(got.Message, markerNumber) {
					t.Errorf("%s body %d: message carries a value: %s", k.kind, i, got.Message)
				}
			}
		}
	}
}

// probedKinds are the kinds the leak tests build objects of: every kind with a built-in probe, and
// two without.
var probedKinds = []struct{ apiVersion, kind string }{
	{"apiextensions.k8s.io/v1", "CustomResourceDefinition"},
	{"v1", "Namespace"},
	{"v1", "PersistentVolumeClaim"},
	{"apps/v1", "Deployment"},
	{"apps/v1", "StatefulSet"},
	{"cert-manager.io/v1", "Certificate"},
	{"cert-manager.io/v1", "Issuer"},
	{"v1", "Secret"},
	{"example.com/v1", "Widget"},
}

// metadataOnly is obj as a metadata-only cache holds it: apiVersion, kind and metadata.
func metadataOnly(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := map[string]any{}
	for _, k := range []string{"apiVersion", "kind", "metadata"} {
		if v, ok := obj.Object[k]; ok {
			out[k] = v
		}
	}
	return &unstructured.Unstructured{Object: out}
}

// TestNeedsContent: content is needed for kinds with a built-in probe and objects a custom probe
// selects (or cannot tell); otherwise the object is ready from its metadata alone.
func TestNeedsContent(t *testing.T) {
	configMap := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"shop","labels":{"app":"shop"}},"data":{"k":"v"}}`
	badOp := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near", Values: []string{"shop"}}}}
	for name, tc := range map[string]struct {
		obj    string
		probes []olmv1.ProgressionProbe
		want   bool
	}{
		"no probe of its kind":           {obj: configMap, want: false},
		"built-in probe of its kind":     {obj: `{` + deployHead + `}`, want: true},
		"a CustomResourceDefinition":     {obj: `{` + crdHead + `}`, want: true},
		"selected by group and kind":     {obj: configMap, probes: []olmv1.ProgressionProbe{gkProbe("", "ConfigMap", fieldVal("data.k", "v"))}, want: true},
		"another kind selected":          {obj: configMap, probes: []olmv1.ProgressionProbe{gkProbe("", "Secret", fieldVal("data.k", "v"))}, want: false},
		"selected by its labels":         {obj: configMap, probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}, condEq("Ready", "True"))}, want: true},
		"labels not selected":            {obj: configMap, probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}, condEq("Ready", "True"))}, want: false},
		"a selector that cannot be read": {obj: configMap, probes: []olmv1.ProgressionProbe{labelProbe(badOp, condEq("Ready", "True"))}, want: true},
		"a selector of an unknown type":  {obj: configMap, probes: []olmv1.ProgressionProbe{{Selector: olmv1.ObjectSelector{Type: "Other"}}}, want: true},
		"an object without apiVersion":   {obj: `{"metadata":{"name":"x"}}`, want: false},
		"an empty object":                {obj: `{}`, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			obj := parse(t, tc.obj)
			if got := NeedsContent(obj, tc.probes); got != tc.want {
				t.Errorf("NeedsContent = %v, want %v", got, tc.want)
			}
			if got := NeedsContent(metadataOnly(obj), tc.probes); got != tc.want {
				t.Errorf("NeedsContent of the metadata = %v, want %v", got, tc.want)
			}
			if !tc.want && !Evaluate(metadataOnly(obj), tc.probes).Ready {
				t.Errorf("needs no content, yet its metadata is not ready: %+v", Evaluate(metadataOnly(obj), tc.probes))
			}
		})
	}
	if !NeedsContent(nil, nil) {
		t.Error("NeedsContent(nil) = false: Evaluate finds nil not ready")
	}
}
