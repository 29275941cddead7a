package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/controllers/reconciler/drift"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// gadgetGroup is served only by the CRD of these tests: the API server's request counts for its
// resource are this file's objects' alone.
const gadgetGroup = "restart.cos-externalizer.test"

// gadgetCRD has the shapes managedFields records differently: a list-map, a set, a map of unknown
// fields, a defaulted field, and the atomic versions list of the CRD itself.
func gadgetCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	return object(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gadgets.`+gadgetGroup+`"},
 "spec":{"group":"`+gadgetGroup+`","names":{"kind":"Gadget","listKind":"GadgetList","plural":"gadgets","singular":"gadget"},"scope":"Namespaced",
  "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object",
   "properties":{"spec":{"type":"object","properties":{"size":{"type":"integer","default":3},
     "tags":{"type":"array","items":{"type":"string"},"x-kubernetes-list-type":"set"},
     "items":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"v":{"type":"string"}}}},
     "free":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
    "status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}`)
}

func gadget(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	return object(t, `{"apiVersion":"`+gadgetGroup+`/v1","kind":"Gadget","metadata":{"name":"`+name+`","namespace":"`+ns+`"},
 "spec":{"tags":["a","b"],"items":[{"name":"x","v":"1"}],"free":{"n":1.5,"m":[1,2],"o":{"p":"q"}}}}`)
}

// normalizedDeployment is applied in forms the API server rewrites: a quantity ("0.5" is stored as
// "500m"), ports without the protocol that keys them, an empty strategy, defaults left out.
func normalizedDeployment(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	return object(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"`+name+`","namespace":"`+ns+`","labels":{"app":"`+name+`"}},
 "spec":{"replicas":1,"selector":{"matchLabels":{"app":"`+name+`"}},"strategy":{},
  "template":{"metadata":{"creationTimestamp":null,"labels":{"app":"`+name+`"}},"spec":{"containers":[{"name":"main","image":"example.invalid/`+name+`:1",
   "ports":[{"containerPort":80},{"containerPort":53,"protocol":"UDP"}],"env":[{"name":"A","value":"1"}],"args":["--a"],
   "resources":{"limits":{"cpu":"0.5","memory":"1Gi"}}}]}}}}`)
}

func service(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	return object(t, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"`+name+`","namespace":"`+ns+`"},
 "spec":{"selector":{"app":"`+name+`"},"ports":[{"name":"http","port":80,"targetPort":8080},{"name":"dns","port":53,"protocol":"UDP"}]}}`)
}

// role holds atomic lists (its rules, their verbs): whether the reconciler still owns them as applied
// is told by their values, which the cache of metadata does not have.
func role(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	return object(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"`+name+`","namespace":"`+ns+`"},
 "rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list"]}]}`)
}

// object decodes a JSON object for a test.
func object(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return u
}

// restartManager stops the manager, runs between (the cluster changes while no manager runs), and
// starts a new one, as a restart or a leader failover does.
func restartManager(t *testing.T, between func()) {
	t.Helper()
	if err := manager.Stop(); err != nil {
		t.Fatal(err)
	}
	between()
	mgr, err := startManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	manager = mgr
}

// tapApplies records the objects the managers of this process apply (their "applying" log lines)
// until the test ends.
func tapApplies(t *testing.T) func() []string {
	var mu sync.Mutex
	var applied []string
	untap := testenv.TapLogs(func(line []byte) {
		var l struct {
			Msg    string `json:"msg"`
			Object string `json:"object"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(line, &l) != nil || l.Msg != "applying" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, l.Object+" ("+l.Reason+")")
	})
	t.Cleanup(untap)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), applied...)
	}
}

// apiServerApplies is the API server's count of server-side applies to a resource of a group.
func apiServerApplies(t *testing.T, group, resource string) float64 {
	t.Helper()
	text, err := testenv.Env.APIServerMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := testenv.SumMetric(strings.NewReader(text), "apiserver_request_total{", `verb="APPLY"`,
		`group="`+group+`"`, `resource="`+resource+`"`, `subresource=""`)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// managerMetric reads a metric of the running manager.
func managerMetric(t *testing.T, prefix string, contains ...string) float64 {
	t.Helper()
	text, err := testenv.ScrapeMetrics(ctx, manager.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := testenv.SumMetric(strings.NewReader(text), prefix, contains...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// written is what says whether an object was written: the time of our managedFields entry, and its
// resourceVersion unless controllers write its status (a Deployment's, a CRD's).
func written(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	if err := c().Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		t.Fatal(err)
	}
	rv := "resourceVersion " + live.GetResourceVersion()
	if k := o.GetKind(); k == "Deployment" || k == "CustomResourceDefinition" {
		rv = "status written by others"
	}
	e := ourEntry(live)
	if e == nil {
		return rv + ", no entry of ours"
	}
	return rv + ", applied at " + e.Time.UTC().Format("15:04:05")
}

// ourEntry is our field manager's Apply entry of managedFields; nil if there is none.
func ourEntry(o *unstructured.Unstructured) *metav1.ManagedFieldsEntry {
	for _, e := range o.GetManagedFields() {
		if e.Manager == controllers.FieldOwner && e.Operation == metav1.ManagedFieldsOperationApply {
			return &e
		}
	}
	return nil
}

// TestRestartWritesNothingUnchanged restarts the manager under a settled ClusterObjectSet: its
// objects, in the forms the API server rewrites, are not applied again. Only the last phase's
// ConfigMap changed meanwhile: that it is restored proves the new manager has reconciled the earlier
// phases.
func TestRestartWritesNothingUnchanged(t *testing.T) {
	ns := "restart-noop"
	testenv.Env.EnsureNamespace(t, ns)
	crd := gadgetCRD(t)
	settled := []*unstructured.Unstructured{
		normalizedDeployment(t, ns, "web"), service(t, ns, "web"), builders.ConfigMap(ns, "settings", map[string]string{"mode": "fast"}),
		gadget(t, ns, "one"), gadget(t, ns, "two"), role(t, ns, "reader"),
	}
	sentinel := builders.ConfigMap(ns, "sentinel", map[string]string{"mode": "fast"})
	var objects []olmv1.ClusterObjectSetObject
	for _, o := range settled {
		objects = append(objects, builders.Inline(o))
	}
	cos := builders.COS("restart-noop", builders.WithPhase("crds", builders.Inline(crd)),
		builders.WithPhase("objects", objects...), builders.WithPhase("last", builders.Inline(sentinel)))
	create(t, cos)
	testenv.Env.RemoveAfter(t, cos.Name)
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)
	settled = append(settled, crd)
	// The Deployment's status settles after Succeeded: wait for what Available says, then compare.
	framework.Eventually(ctx, t, "the Deployment to settle", func(ctx context.Context) (bool, string) {
		d := &appsv1.Deployment{}
		if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
			return false, err.Error()
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 1 && d.Status.UpdatedReplicas == 1,
			fmt.Sprintf("%+v", d.Status)
	})
	before := map[string]string{}
	for _, o := range settled {
		before[o.GetName()+" "+o.GetKind()] = written(t, o)
	}
	gadgetApplies := apiServerApplies(t, gadgetGroup, "gadgets")
	skipped := managerMetric(t, "cos_externalizer_applies_skipped_total")
	applied := tapApplies(t)

	restartManager(t, func() {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"mode":"slow"}}`))
		if err := c().Patch(ctx, sentinel.DeepCopy(), patch, client.FieldOwner("someone-else")); err != nil {
			t.Fatal(err)
		}
	})
	framework.Eventually(ctx, t, "the last phase's ConfigMap to be restored", func(ctx context.Context) (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c().Get(ctx, client.ObjectKeyFromObject(sentinel), cm); err != nil {
			return false, err.Error()
		}
		return cm.Data["mode"] == "fast", fmt.Sprint(cm.Data)
	})

	want := []string{"ConfigMap " + ns + "/sentinel (" + drift.ReasonField + ")"}
	var got []string
	for _, a := range applied() {
		if strings.Contains(a, " "+ns+"/") || strings.Contains(a, gadgetGroup) {
			got = append(got, a)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("applied after the restart: %v, want only %v", got, want)
	}
	if got := apiServerApplies(t, gadgetGroup, "gadgets"); got != gadgetApplies {
		t.Errorf("the API server served %v applies of gadgets after the restart", got-gadgetApplies)
	}
	for _, o := range settled {
		if got, was := written(t, o), before[o.GetName()+" "+o.GetKind()]; got != was {
			t.Errorf("%s %s written after the restart: %s, was %s", o.GetKind(), o.GetName(), got, was)
		}
	}
	if got := managerMetric(t, "cos_externalizer_applies_skipped_total"); got < skipped+float64(len(settled)) {
		t.Errorf("cos_externalizer_applies_skipped_total grew by %v, want at least %d", got-skipped, len(settled))
	}
}

// TestRestartRestoresDrift changes, as other clients do while no manager runs, fields the
// reconciler applied: each is restored by the new manager, whose first reconcile has no memory of
// earlier applies.
func TestRestartRestoresDrift(t *testing.T) {
	ns := "restart-drift"
	testenv.Env.EnsureNamespace(t, ns)
	cm := func(name string) *unstructured.Unstructured {
		o := builders.ConfigMap(ns, name, map[string]string{"mode": "fast"})
		o.SetLabels(map[string]string{"team": "platform"})
		o.SetAnnotations(map[string]string{"owner": "team-a"})
		return o
	}
	crd := gadgetCRD(t)
	type drifted struct {
		obj      *unstructured.Unstructured
		change   func(o *unstructured.Unstructured) error
		restored func(o *unstructured.Unstructured) bool
	}
	mergePatch := func(manager, p string, subresource ...string) func(o *unstructured.Unstructured) error {
		return func(o *unstructured.Unstructured) error {
			patch := client.RawPatch(types.MergePatchType, []byte(p))
			if len(subresource) > 0 {
				return c().SubResource(subresource[0]).Patch(ctx, o.DeepCopy(), patch, client.FieldOwner(manager))
			}
			return c().Patch(ctx, o.DeepCopy(), patch, client.FieldOwner(manager))
		}
	}
	str := func(path ...string) func(o *unstructured.Unstructured) string {
		return func(o *unstructured.Unstructured) string {
			s, _, _ := unstructured.NestedString(o.Object, path...)
			return s
		}
	}
	is := func(get func(*unstructured.Unstructured) string, want string) func(o *unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool { return get(o) == want }
	}
	image := func(o *unstructured.Unstructured) string {
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(cs) == 0 {
			return ""
		}
		s, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image")
		return s
	}
	tests := map[string]drifted{
		"a label removed":       {cm("label"), mergePatch("kubectl-label", `{"metadata":{"labels":{"team":null}}}`), is(str("metadata", "labels", "team"), "platform")},
		"an annotation changed": {cm("annotation"), mergePatch("kubectl-annotate", `{"metadata":{"annotations":{"owner":"intruder"}}}`), is(str("metadata", "annotations", "owner"), "team-a")},
		"the digest removed": {cm("digest"), mergePatch("kubectl-annotate", `{"metadata":{"annotations":{"`+drift.Annotation+`":null}}}`), func(o *unstructured.Unstructured) bool {
			return str("metadata", "annotations", drift.Annotation)(o) != ""
		}},
		"the digest changed": {cm("digest-changed"), mergePatch("kubectl-annotate", `{"metadata":{"annotations":{"`+drift.Annotation+`":"sha256:0"}}}`), func(o *unstructured.Unstructured) bool {
			return str("metadata", "annotations", drift.Annotation)(o) != "sha256:0"
		}},
		"a data field changed": {cm("data"), mergePatch("kubectl-edit", `{"data":{"mode":"slow"}}`), is(str("data", "mode"), "fast")},
		"managedFields wiped":  {cm("wiped"), mergePatch("kubectl-patch", `{"metadata":{"managedFields":[{}]}}`), func(o *unstructured.Unstructured) bool { return ourEntry(o) != nil }},
		"scaled": {normalizedDeployment(t, ns, "scaled"), mergePatch("kubectl", `{"spec":{"replicas":3}}`, "scale"), func(o *unstructured.Unstructured) bool {
			n, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			return n == 1
		}},
		"a container image edited": {normalizedDeployment(t, ns, "image"), mergePatch("kubectl-edit", `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"example.invalid/other:2"}]}}}}`), func(o *unstructured.Unstructured) bool { return image(o) == "example.invalid/image:1" }},
		"a free-form field changed": {gadget(t, ns, "free"), mergePatch("someone-else", `{"spec":{"free":{"n":9,"m":[3],"o":{"p":"r"}}}}`), func(o *unstructured.Unstructured) bool {
			return str("spec", "free", "o", "p")(o) == "q"
		}},
		"forced by another applier": {cm("forced"), func(o *unstructured.Unstructured) error {
			other := builders.ConfigMap(ns, o.GetName(), map[string]string{"mode": "theirs"})
			return c().Apply(ctx, client.ApplyConfigurationFromUnstructured(other), client.FieldOwner("other-applier"), client.ForceOwnership)
		}, is(str("data", "mode"), "fast")},
	}
	var objects []olmv1.ClusterObjectSetObject
	for _, tc := range tests {
		objects = append(objects, builders.Inline(tc.obj))
	}
	cos := builders.COS("restart-drift", builders.WithPhase("crds", builders.Inline(crd)), builders.WithPhase("objects", objects...))
	create(t, cos)
	testenv.Env.RemoveAfter(t, cos.Name)
	testenv.Env.WaitForCondition(t, cos.Name, olmv1.ConditionSucceeded, metav1.ConditionTrue, olmv1.ReasonSucceeded)

	restartManager(t, func() {
		for name, tc := range tests {
			if err := tc.change(tc.obj); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(tc.obj.GroupVersionKind())
			if err := c().Get(ctx, client.ObjectKeyFromObject(tc.obj), live); err != nil {
				t.Fatal(err)
			}
			if tc.restored(live) {
				t.Fatalf("%s: the change changed nothing", name)
			}
		}
	})
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			framework.Eventually(ctx, t, name+" to be restored", func(ctx context.Context) (bool, string) {
				live := &unstructured.Unstructured{}
				live.SetGroupVersionKind(tc.obj.GroupVersionKind())
				if err := c().Get(ctx, client.ObjectKeyFromObject(tc.obj), live); err != nil {
					return false, err.Error()
				}
				return tc.restored(live), fmt.Sprint(live.Object["data"], live.GetLabels())
			})
		})
	}
}
