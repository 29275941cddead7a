package probes

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// TestMessages is the catalogue of messages: for each situation, the exact Result.Message. The
// wording is upstream's (operator-controller's `Object <Kind>.<groupVersion> <ns>/<name>: ...` line
// and boxcutter's probe messages) with every value observed on the object left out.
func TestMessages(t *testing.T) {
	const (
		pvcHead  = `"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"shop"}`
		nsHead   = `"apiVersion":"v1","kind":"Namespace","metadata":{"name":"foo"}`
		certHead = `"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"name":"tls","namespace":"shop","generation":2}`
		issHead  = `"apiVersion":"cert-manager.io/v1","kind":"Issuer","metadata":{"name":"ca","namespace":"shop","generation":2}`
		crdID    = `Object CustomResourceDefinition.apiextensions.k8s.io/v1 /widgets.example.com: `
		depID    = `Object Deployment.apps/v1 shop/web: `
		stsID    = `Object StatefulSet.apps/v1 shop/db: `
		widgetID = `Object Widget.example.com/v1 shop/w1: `
	)
	widgetProbe := func(as ...olmv1.Assertion) []olmv1.ProgressionProbe {
		return []olmv1.ProgressionProbe{gkProbe("example.com", "Widget", as...)}
	}
	badKey := metav1.LabelSelector{MatchLabels: map[string]string{"not a key!": "x"}}
	_, badKeyErr := metav1.LabelSelectorAsSelector(&badKey)
	if badKeyErr == nil {
		t.Fatal("test selector is expected to be invalid")
	}

	tests := map[string]struct {
		obj    string
		probes []olmv1.ProgressionProbe
		want   string
	}{
		// Upstream's e2e strings (test/e2e/features/revision.feature), without ` got: <observed>`.
		"e2e: PersistentVolumeClaim not bound": {
			obj:  `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"test-pvc","namespace":"ns"},"status":{"phase":"Pending"}}`,
			want: `Object PersistentVolumeClaim.v1 ns/test-pvc: value at key "status.phase" != "Bound"; expected: "Bound"`,
		},
		"e2e: ConfigMap failing a label-selected FieldValue probe": {
			obj:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"test-configmap-1","namespace":"ns","labels":{"app":"test"}},"data":{"foo":"foo"}}`,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": "test"}}, fieldVal("data.foo", "bar"))},
			want:   `Object ConfigMap.v1 ns/test-configmap-1: value at key "data.foo" != "bar"; expected: "bar"`,
		},

		// Identity: core and grouped apiVersions, namespaced and cluster-scoped objects.
		"identity: core, cluster-scoped": {
			obj:  `{` + nsHead + `,"status":{"phase":"Terminating"}}`,
			want: `Object Namespace.v1 /foo: value at key "status.phase" != "Active"; expected: "Active"`,
		},
		"identity: grouped, cluster-scoped": {
			obj:  `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"foos.example.com"}}`,
			want: `Object CustomResourceDefinition.apiextensions.k8s.io/v1 /foos.example.com: missing .status.conditions`,
		},
		"identity: core, namespaced": {
			obj:  `{` + pvcHead + `}`,
			want: `Object PersistentVolumeClaim.v1 shop/data: missing key: "status.phase"`,
		},
		"identity: grouped, namespaced": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"False"}]}}`,
			want: depID + `.status.condition["Available"] is not True`,
		},
		"identity: an apiVersion that does not parse is shown as it is": {
			obj:  `{"apiVersion":"apps/v1/x","kind":"Deployment","metadata":{"name":"web","namespace":"shop"}}`,
			want: `Object Deployment.apps/v1/x shop/web: missing .status.conditions`,
		},
		"identity: no kind": {
			obj:    `{"apiVersion":"v1","metadata":{"name":"x","labels":{"a":"b"}}}`,
			probes: []olmv1.ProgressionProbe{labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, fieldVal("data.foo", "bar"))},
			want:   `Object .v1 /x: missing key: "data.foo"`,
		},

		// CustomResourceDefinition: condition Established=True.
		"crd: no status.conditions": {
			obj:  `{` + crdHead + `,"status":{}}`,
			want: crdID + `missing .status.conditions`,
		},
		"crd: status is not a map": {
			obj:  `{` + crdHead + `,"status":"Established"}`,
			want: crdID + `missing .status.conditions`,
		},
		"crd: null status.conditions": {
			obj:  `{` + crdHead + `,"status":{"conditions":null}}`,
			want: crdID + `missing .status.conditions`,
		},
		"crd: status.conditions not a list": {
			obj:  `{` + crdHead + `,"status":{"conditions":"Established"}}`,
			want: crdID + `malformed .status.conditions`,
		},
		"crd: no Established condition": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"NamesAccepted","status":"True"},"junk"]}}`,
			want: crdID + `missing .status.condition["Established"]`,
		},
		"crd: Established of an older generation": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"True","observedGeneration":1}]}}`,
			want: crdID + `.status.condition["Established"] outdated`,
		},
		"crd: Established False": {
			obj:  `{` + crdHead + `,"status":{"conditions":[{"type":"Established","status":"False"}]}}`,
			want: crdID + `.status.condition["Established"] is not True`,
		},
		"crd: status of an older generation": {
			obj:  `{` + crdHead + `,"status":{"observedGeneration":1,"conditions":[{"type":"Established","status":"False"}]}}`,
			want: crdID + `.status outdated`,
		},

		// cert-manager Certificate and Issuer: condition Ready=True.
		"certificate: no status.conditions": {
			obj:  `{` + certHead + `}`,
			want: `Object Certificate.cert-manager.io/v1 shop/tls: missing .status.conditions`,
		},
		"certificate: status.conditions not a list": {
			obj:  `{` + certHead + `,"status":{"conditions":{"Ready":"True"}}}`,
			want: `Object Certificate.cert-manager.io/v1 shop/tls: malformed .status.conditions`,
		},
		"certificate: no Ready condition": {
			obj:  `{` + certHead + `,"status":{"conditions":[{"type":"Issuing","status":"True"}]}}`,
			want: `Object Certificate.cert-manager.io/v1 shop/tls: missing .status.condition["Ready"]`,
		},
		"certificate: Ready of an older generation": {
			obj:  `{` + certHead + `,"status":{"conditions":[{"type":"Ready","status":"True","observedGeneration":1}]}}`,
			want: `Object Certificate.cert-manager.io/v1 shop/tls: .status.condition["Ready"] outdated`,
		},
		"certificate: Ready False": {
			obj:  `{` + certHead + `,"status":{"conditions":[{"type":"Ready","status":"False","observedGeneration":2}]}}`,
			want: `Object Certificate.cert-manager.io/v1 shop/tls: .status.condition["Ready"] is not True`,
		},
		"issuer: no status.conditions": {
			obj:  `{` + issHead + `}`,
			want: `Object Issuer.cert-manager.io/v1 shop/ca: missing .status.conditions`,
		},
		"issuer: no Ready condition": {
			obj:  `{` + issHead + `,"status":{"conditions":[]}}`,
			want: `Object Issuer.cert-manager.io/v1 shop/ca: missing .status.condition["Ready"]`,
		},
		"issuer: Ready of an older generation": {
			obj:  `{` + issHead + `,"status":{"conditions":[{"type":"Ready","status":"True","observedGeneration":1}]}}`,
			want: `Object Issuer.cert-manager.io/v1 shop/ca: .status.condition["Ready"] outdated`,
		},
		"issuer: Ready Unknown": {
			obj:  `{` + issHead + `,"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}}`,
			want: `Object Issuer.cert-manager.io/v1 shop/ca: .status.condition["Ready"] is not True`,
		},

		// Namespace (status.phase Active) and PersistentVolumeClaim (status.phase Bound), as FieldValue.
		"namespace: no status.phase": {
			obj:  `{` + nsHead + `,"status":{}}`,
			want: `Object Namespace.v1 /foo: missing key: "status.phase"`,
		},
		"namespace: null status.phase": {
			obj:  `{` + nsHead + `,"status":{"phase":null}}`,
			want: `Object Namespace.v1 /foo: missing key: "status.phase"`,
		},
		"namespace: status is a list": {
			obj:  `{` + nsHead + `,"status":["Active"]}`,
			want: `Object Namespace.v1 /foo: error locating key "status.phase"`,
		},
		"namespace: status.phase not a string": {
			obj:  `{` + nsHead + `,"status":{"phase":{"name":"Active"}}}`,
			want: `Object Namespace.v1 /foo: value at key "status.phase" != "Active"; expected: "Active"`,
		},
		"pvc: no status": {
			obj:  `{` + pvcHead + `}`,
			want: `Object PersistentVolumeClaim.v1 shop/data: missing key: "status.phase"`,
		},
		"pvc: status is a string": {
			obj:  `{` + pvcHead + `,"status":"Bound"}`,
			want: `Object PersistentVolumeClaim.v1 shop/data: error locating key "status.phase"`,
		},
		"pvc: Lost": {
			obj:  `{` + pvcHead + `,"status":{"phase":"Lost"}}`,
			want: `Object PersistentVolumeClaim.v1 shop/data: value at key "status.phase" != "Bound"; expected: "Bound"`,
		},

		// Deployment: "status.updatedReplicas" == "status.replicas" (== spec.replicas) and Available=True.
		"deployment: upstream's example, without the values": {
			obj:  `{` + deployHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":1,"conditions":[{"type":"Available","status":"False"}]}}`,
			want: depID + `"status.updatedReplicas" != "status.replicas" and .status.condition["Available"] is not True`,
		},
		"deployment: updatedReplicas behind": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":2,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: depID + `"status.updatedReplicas" != "status.replicas"`,
		},
		"deployment: replicas other than spec.replicas": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":4,"updatedReplicas":4,"conditions":[{"type":"Available","status":"True"}]}}`,
			want: depID + `"status.replicas" != "spec.replicas"`,
		},
		"deployment: every False check, joined in order": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":1,"conditions":[{"type":"Available","status":"False"}]}}`,
			want: depID + `"status.updatedReplicas" != "status.replicas" and "status.replicas" != "spec.replicas" and .status.condition["Available"] is not True`,
		},
		"deployment: Unknown wins over False (no conditions)": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":1}}`,
			want: depID + `missing .status.conditions`,
		},
		"deployment: Unknown wins over False (no Available condition)": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":2,"conditions":[{"type":"Progressing","status":"True"}]}}`,
			want: depID + `missing .status.condition["Available"]`,
		},
		"deployment: Unknown wins over False (Available outdated)": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":2,"conditions":[{"type":"Available","status":"True","observedGeneration":2}]}}`,
			want: depID + `.status.condition["Available"] outdated`,
		},
		"deployment: malformed conditions": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"conditions":{}}}`,
			want: depID + `malformed .status.conditions`,
		},
		"deployment: status outdated": {
			obj:  `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":3}}`,
			want: depID + `.status outdated`,
		},
		"deployment: integers that are not integers": {
			obj:  `{` + deployHead + `,"spec":{"replicas":"3"},"status":{"observedGeneration":3,"replicas":1.5,"updatedReplicas":true,"conditions":[{"type":"Available","status":"False"}]}}`,
			want: depID + `value at key "spec.replicas" is not an integer and value at key "status.replicas" is not an integer and value at key "status.updatedReplicas" is not an integer and .status.condition["Available"] is not True`,
		},

		// StatefulSet: as Deployment; without an Available condition, availableReplicas == spec.replicas.
		"statefulset: availableReplicas behind, no Available condition": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":1}}`,
			want: stsID + `"status.availableReplicas" != "spec.replicas"`,
		},
		"statefulset: every False check, no Available condition": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":1,"updatedReplicas":0}}`,
			want: stsID + `"status.updatedReplicas" != "status.replicas" and "status.replicas" != "spec.replicas" and "status.availableReplicas" != "spec.replicas"`,
		},
		"statefulset: availableReplicas not an integer": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":"2"}}`,
			want: stsID + `value at key "status.availableReplicas" is not an integer`,
		},
		"statefulset: Available False": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":1,"availableReplicas":2,"conditions":[{"type":"Available","status":"False"}]}}`,
			want: stsID + `"status.updatedReplicas" != "status.replicas" and .status.condition["Available"] is not True`,
		},
		"statefulset: Available outdated": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"conditions":[{"type":"Available","status":"True","observedGeneration":1}]}}`,
			want: stsID + `.status.condition["Available"] outdated`,
		},
		"statefulset: status outdated": {
			obj:  `{` + stsHead + `,"spec":{"replicas":2},"status":{"observedGeneration":4}}`,
			want: stsID + `.status outdated`,
		},

		// ConditionEqual.
		"ConditionEqual: no status.conditions": {
			obj:    `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","namespace":"shop"}}`,
			probes: widgetProbe(condEq("Ready", "True")),
			want:   widgetID + `missing .status.conditions`,
		},
		"ConditionEqual: status.conditions not a list": {
			obj:    `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","namespace":"shop"},"status":{"conditions":"Ready"}}`,
			probes: widgetProbe(condEq("Ready", "True")),
			want:   widgetID + `malformed .status.conditions`,
		},
		"ConditionEqual: no condition of the type": {
			obj:    widget,
			probes: widgetProbe(condEq("Synced", "True")),
			want:   widgetID + `missing .status.condition["Synced"]`,
		},
		"ConditionEqual: condition of an older generation": {
			obj:    widget,
			probes: widgetProbe(condEq("Old", "True")),
			want:   widgetID + `.status.condition["Old"] outdated`,
		},
		"ConditionEqual: True expected": {
			obj:    widget,
			probes: widgetProbe(condEq("Degraded", "True")),
			want:   widgetID + `.status.condition["Degraded"] is not True`,
		},
		"ConditionEqual: False expected": {
			obj:    widget,
			probes: widgetProbe(condEq("Ready", "False")),
			want:   widgetID + `.status.condition["Ready"] is not False`,
		},

		// FieldsEqual.
		"FieldsEqual: fieldA missing": {
			obj:    widget,
			probes: widgetProbe(fieldsEq("spec.absent", "spec.replicas")),
			want:   widgetID + `"spec.absent" missing`,
		},
		"FieldsEqual: fieldB missing": {
			obj:    widget,
			probes: widgetProbe(fieldsEq("spec.replicas", "status.absent")),
			want:   widgetID + `"status.absent" missing`,
		},
		"FieldsEqual: both missing names fieldA only": {
			obj:    widget,
			probes: widgetProbe(fieldsEq("spec.absent", "status.absent")),
			want:   widgetID + `"spec.absent" missing`,
		},
		"FieldsEqual: path through a scalar is missing": {
			obj:    widget,
			probes: widgetProbe(fieldsEq("spec.replicas", "spec.size.value")),
			want:   widgetID + `"spec.size.value" missing`,
		},
		"FieldsEqual: values differ": {
			obj:    widget,
			probes: widgetProbe(fieldsEq("spec.replicas", "spec.neg")),
			want:   widgetID + `"spec.replicas" != "spec.neg"`,
		},
		"FieldsEqual: string and number differ": {
			obj:    widget,
			probes: widgetProbe(fieldsEq("spec.size", "spec.replicas")),
			want:   widgetID + `"spec.size" != "spec.replicas"`,
		},

		// FieldValue.
		"FieldValue: missing key": {
			obj:    widget,
			probes: widgetProbe(fieldVal("status.absent", "x")),
			want:   widgetID + `missing key: "status.absent"`,
		},
		"FieldValue: null value is a missing key": {
			obj:    widget,
			probes: widgetProbe(fieldVal("spec.nothing", "null")),
			want:   widgetID + `missing key: "spec.nothing"`,
		},
		"FieldValue: path through null is a missing key": {
			obj:    widget,
			probes: widgetProbe(fieldVal("spec.nothing.deeper", "x")),
			want:   widgetID + `missing key: "spec.nothing.deeper"`,
		},
		"FieldValue: path through a string": {
			obj:    widget,
			probes: widgetProbe(fieldVal("status.phase.name", "x")),
			want:   widgetID + `error locating key "status.phase.name"`,
		},
		"FieldValue: path into a list": {
			obj:    widget,
			probes: widgetProbe(fieldVal("spec.list.0", "x")),
			want:   widgetID + `error locating key "spec.list.0"`,
		},
		"FieldValue: other string": {
			obj:    widget,
			probes: widgetProbe(fieldVal("status.phase", "Done")),
			want:   widgetID + `value at key "status.phase" != "Done"; expected: "Done"`,
		},
		"FieldValue: other number": {
			obj:    widget,
			probes: widgetProbe(fieldVal("spec.replicas", "4")),
			want:   widgetID + `value at key "spec.replicas" != "4"; expected: "4"`,
		},
		"FieldValue: other boolean": {
			obj:    widget,
			probes: widgetProbe(fieldVal("spec.enabled", "false")),
			want:   widgetID + `value at key "spec.enabled" != "false"; expected: "false"`,
		},
		"FieldValue: a map never matches": {
			obj:    widget,
			probes: widgetProbe(fieldVal("spec.nested", "x")),
			want:   widgetID + `value at key "spec.nested" != "x"; expected: "x"`,
		},
		"FieldValue: the expected value is JSON, the value after != is Go-quoted (as upstream)": {
			obj:    widget,
			probes: widgetProbe(fieldVal("status.phase", `a"<b>&é`)),
			want:   widgetID + `value at key "status.phase" != "a\"<b>&é"; expected: "a\"\u003cb\u003e\u0026é"`,
		},

		// Combining (boxcutter's And).
		"several False messages are joined with and": {
			obj: widget,
			probes: []olmv1.ProgressionProbe{
				gkProbe("example.com", "Widget", fieldVal("status.phase", "Done"), fieldsEq("spec.replicas", "spec.neg")),
				labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}, condEq("Ready", "False"), fieldVal("spec.absent", "x")),
			},
			want: widgetID + `value at key "status.phase" != "Done"; expected: "Done" and "spec.replicas" != "spec.neg" and .status.condition["Ready"] is not False and missing key: "spec.absent"`,
		},
		"Unknown messages hide False ones": {
			obj: widget,
			probes: widgetProbe(fieldVal("status.phase", "Done"), condEq("Synced", "True"), fieldsEq("spec.size", "spec.replicas"),
				condEq("Old", "True"), condEq("Ready", "False")),
			want: widgetID + `missing .status.condition["Synced"] and .status.condition["Old"] outdated`,
		},
		"Unknown of a custom probe hides False of the built-in one": {
			obj:    `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":1,"conditions":[{"type":"Available","status":"False"}]}}`,
			probes: []olmv1.ProgressionProbe{gkProbe("apps", "Deployment", condEq("Progressing", "True"))},
			want:   depID + `missing .status.condition["Progressing"]`,
		},
		"False of the built-in probe, then of custom ones": {
			obj:    `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"readyReplicas":2,"conditions":[{"type":"Available","status":"False"}]}}`,
			probes: []olmv1.ProgressionProbe{gkProbe("apps", "Deployment", fieldsEq("spec.replicas", "status.readyReplicas"))},
			want:   depID + `.status.condition["Available"] is not True and "spec.replicas" != "status.readyReplicas"`,
		},
		"a message repeated by several probes is said once": {
			obj:    `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3}}`,
			probes: []olmv1.ProgressionProbe{gkProbe("apps", "Deployment", condEq("Available", "True"), condEq("Ready", "True")), gkProbe("apps", "Deployment", condEq("Available", "True"))},
			want:   depID + `missing .status.conditions`,
		},
		".status outdated is said once, however many probes apply": {
			obj: `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}}`,
			probes: []olmv1.ProgressionProbe{
				gkProbe("apps", "Deployment", fieldVal("status.phase", "x")),
				labelProbe(metav1.LabelSelector{}, condEq("Ready", "True")),
			},
			want: depID + `.status outdated`,
		},

		// Custom probes that cannot be evaluated: they name the probe, and hide every other message.
		"invalid label selector, with the selector's error": {
			obj:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"shop"}}`,
			probes: []olmv1.ProgressionProbe{labelProbe(badKey, condEq("Ready", "True"))},
			want:   `Object ConfigMap.v1 shop/c: progressionProbes[0].selector: invalid label selector: ` + badKeyErr.Error(),
		},
		"unknown selector type": {
			obj:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"shop"}}`,
			probes: []olmv1.ProgressionProbe{{Selector: olmv1.ObjectSelector{Type: "Name"}, Assertions: []olmv1.Assertion{condEq("Ready", "True")}}},
			want:   `Object ConfigMap.v1 shop/c: progressionProbes[0].selector: unknown selector type "Name"`,
		},
		"unknown assertion type": {
			obj:    widget,
			probes: widgetProbe(condEq("Ready", "True"), olmv1.Assertion{Type: "Regex"}),
			want:   widgetID + `progressionProbes[0].assertions[1]: unknown assertion type "Regex"`,
		},
		"spec problems hide the probes' messages, and are all said in order": {
			obj: `{` + deployHead + `,"spec":{"replicas":3},"status":{"observedGeneration":2}}`,
			probes: []olmv1.ProgressionProbe{
				gkProbe("apps", "Deployment", condEq("Available", "True"), olmv1.Assertion{Type: "Regex"}),
				gkProbe("apps", "StatefulSet", olmv1.Assertion{Type: "Regex"}), // does not apply
				{Selector: olmv1.ObjectSelector{Type: "Name"}},
				labelProbe(badKey),
			},
			want: depID + `progressionProbes[0].assertions[1]: unknown assertion type "Regex" and progressionProbes[2].selector: unknown selector type "Name" and progressionProbes[3].selector: invalid label selector: ` + badKeyErr.Error(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Evaluate(parse(t, tc.obj), tc.probes)
			if diff := cmp.Diff(notReady(tc.want), got); diff != "" {
				t.Errorf("Evaluate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMessagesCarryNoRandomValues builds random objects of every probed kind whose values are random
// tokens and numbers mixed with meaningful ones (True, Active, 3...), probes them with custom probes
// reading the same paths, and checks that no message ever repeats a random value.
func TestMessagesCarryNoRandomValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(20240601, 7))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	kinds := probedKinds
	meaningful := []any{"True", "False", "Unknown", "Active", "Bound", "Pending", "", int64(0), int64(1), int64(2), int64(3), 2.5, true, false, nil}
	probes := []olmv1.ProgressionProbe{
		labelProbe(metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			condEq("Available", "True"), condEq("Ready", "False"), condEq("Synced", "True"),
			fieldsEq("spec.password", "data.password"), fieldsEq("spec.replicas", "status.replicas"), fieldsEq("status.phase", "spec.password"),
			fieldVal("spec.password", "hunter2"), fieldVal("spec.replicas", "3"), fieldVal("data.password", "True"), fieldVal("status.phase", "Active"),
			fieldVal("status.phase.deeper", "x"), fieldVal("metadata.annotations.note", "x"),
		),
		gkProbe("", "Secret", fieldVal("data.password", "guess"), fieldsEq("data.password", "spec.password")),
	}
	for iter := range 3000 {
		var planted []string
		token := func() string {
			b := make([]byte, 16)
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			planted = append(planted, string(b))
			return string(b)
		}
		value := func() any {
			switch rng.IntN(7) {
			case 0, 1:
				return token()
			case 2, 3:
				return meaningful[rng.IntN(len(meaningful))]
			case 4:
				n := rng.Int64N(1e12) + 1e12
				planted = append(planted, strconv.FormatInt(n, 10))
				return n
			case 5:
				return map[string]any{"v": token()}
			default:
				return []any{token()}
			}
		}
		condition := func(ctype string) any {
			c := map[string]any{"type": ctype, "status": value(), "reason": value(), "message": value()}
			if rng.IntN(2) == 0 {
				c["observedGeneration"] = value()
			}
			return c
		}
		var status any
		switch rng.IntN(4) {
		case 0:
			status = value()
		default:
			st := map[string]any{
				"phase": value(), "observedGeneration": value(),
				"replicas": value(), "updatedReplicas": value(), "availableReplicas": value(),
			}
			switch rng.IntN(3) {
			case 0:
				st["conditions"] = value()
			default:
				var conds []any
				for _, ct := range []string{"Available", "Ready", "Established", "Synced"} {
					if rng.IntN(3) > 0 {
						conds = append(conds, condition(ct))
					}
				}
				st["conditions"] = conds
			}
			status = st
		}
		k := kinds[rng.IntN(len(kinds))]
		obj := map[string]any{
			"apiVersion": k.apiVersion, "kind": k.kind,
			"metadata": map[string]any{
				"name": "n", "namespace": "ns", "generation": int64(rng.IntN(3)),
				"labels": map[string]any{"app": "x"}, "annotations": map[string]any{"note": value()},
			},
			"spec":   map[string]any{"replicas": value(), "password": value()},
			"data":   map[string]any{"password": value()},
			"status": status,
		}
		for _, ps := range [][]olmv1.ProgressionProbe{nil, probes} {
			got := Evaluate(&unstructured.Unstructured{Object: obj}, ps)
			for _, p := range planted {
				if strings.Contains(got.Message, p) {
					t.Fatalf("iteration %d, %s: message carries the value %s: %s", iter, k.kind, p, got.Message)
				}
			}
		}
	}
}
