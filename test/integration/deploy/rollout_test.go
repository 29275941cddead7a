package deploy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
	"github.com/cos-externalizer/cos-externalizer/internal/olmlayout"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestRolloutAuto: --rollout=auto on clusters as OLM's releases leave them: nothing of OLM, standard
// OLM (only its ClusterExtension CRD), OLM with its ClusterObjectSet CRD (experimental,
// BoxcutterRuntime), and ours beside OLM with signals that disagree (another controller's teardown
// finalizer, operator-controller's gate on, object-controller's Deployment of OLM's newer layout).
// The manager's RBAC reads every signal.
func TestRolloutAuto(t *testing.T) {
	ctx := context.Background()
	c := testenv.Env.Client
	decide := func(t *testing.T, want string, names ...string) {
		t.Helper()
		framework.Eventually(ctx, t, "--rollout=auto to decide "+want, func(ctx context.Context) (bool, string) {
			rollOut, why, err := app.DecideRollout(ctx, testenv.Env.Config, app.RolloutAuto)
			got, text := fmt.Sprint(rollOut), why
			if err != nil {
				got, text = "error", err.Error()
			}
			for _, n := range names {
				if !strings.Contains(text, n) {
					return false, fmt.Sprintf("%s, not naming %q: %s", got, n, text)
				}
			}
			return got == want, got + ": " + text
		})
	}
	if rollOut, _, _ := app.DecideRollout(ctx, testenv.Env.Config, "true"); !rollOut {
		t.Error("--rollout=true did not roll out")
	}

	t.Log("nothing of OLM; our CRD")
	decide(t, "true", "ClusterExtension API is not served", "not OLM's")

	t.Log("standard OLM: its ClusterExtension CRD")
	ce := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "clusterextensions.olm.operatorframework.io",
			Annotations: map[string]string{olmlayout.GeneratorAnnotation: "standard"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "olm.operatorframework.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusterextensions", Singular: "clusterextension", Kind: "ClusterExtension", ListKind: "ClusterExtensionList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := c.Create(ctx, ce); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Gone from discovery before the next test (or run) asks again.
		if err := c.Delete(ctx, ce); err != nil {
			t.Error(err)
		}
		decide(t, "true", "ClusterExtension API is not served")
	})
	decide(t, "true", "standard feature set", "not OLM's")

	t.Log("experimental OLM with its ClusterObjectSet CRD")
	annotateCRD(t, "clusterextensions.olm.operatorframework.io", "experimental")
	annotateCRD(t, "clusterobjectsets.olm.operatorframework.io", "experimental")
	decide(t, "false", "the ClusterObjectSet CRD is OLM's", "--rollout=true")
	annotateCRD(t, "clusterobjectsets.olm.operatorframework.io", "")

	t.Log("experimental OLM, our CRD, operator-controller's gate on: they disagree")
	applySystemNamespace(t)
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: olmlayout.Namespace, Name: olmlayout.OperatorControllerDeployment},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"control-plane": "operator-controller-controller-manager"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"control-plane": "operator-controller-controller-manager"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "operator-controller", Command: []string{"/operator-controller"},
					Args: []string{"--leader-elect", "--feature-gates=BoxcutterRuntime=true", "--feature-gates=DeploymentConfig=true"}}}},
			},
		},
	}
	if err := c.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Delete(ctx, deploy); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
	decide(t, "error", "disagree", "BoxcutterRuntime on", "not OLM's", "--rollout=false")

	t.Log("the default overlay's RBAC reads every signal")
	applyRBAC(t, "default")
	env := impersonating(t, "system:serviceaccount:"+systemNamespace+":"+serviceAccount)
	obs, err := app.ObserveOLM(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := olmlayout.Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: olmlayout.CRDOther, Gate: olmlayout.GateOn, ObjectController: olmlayout.Absent}
	if diff := cmp.Diff(want, obs); diff != "" {
		t.Errorf("as the manager (-want +got):\n%s", diff)
	}

	t.Log("OLM's newer layout: object-controller's Deployment as its chart renders it, read as the manager")
	objs, err := manifests.ReadFile(filepath.Join("..", "..", "..", "internal", "olmlayout", "testdata", "object-controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objectController := &appsv1.Deployment{}
	convert(t, find(objs, "Deployment", olmlayout.ObjectControllerDeployment), objectController)
	if err := c.Create(ctx, objectController); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Delete(ctx, objectController); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
	framework.Eventually(ctx, t, "the manager to see object-controller's Deployment", func(ctx context.Context) (bool, string) {
		obs, err := app.ObserveOLM(ctx, env.Config)
		return err == nil && obs.ObjectController == olmlayout.Present && len(obs.Unreadable) == 0, fmt.Sprintf("%+v %v", obs, err)
	})
	decide(t, "error", "disagree", "object-controller's Deployment olmv1-system/object-controller-controller-manager exists", "not OLM's")
	if err := c.Delete(ctx, objectController); err != nil {
		t.Fatal(err)
	}

	t.Log("standard OLM, our CRD, another controller holds the teardown finalizer: they disagree")
	if err := c.Delete(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	annotateCRD(t, "clusterextensions.olm.operatorframework.io", "standard")
	decide(t, "true", "standard feature set")
	name := "rollout-auto-olm"
	cos := builders.COS(name, builders.WithPhase("configuration", builders.InlineConfigMaps("default", name, 1)...))
	if err := c.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	testenv.Env.RemoveAfter(t, name)
	// As operator-controller adds it: a merge patch, its field manager named after its binary.
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"finalizers":[%q]}}`, cos.ResourceVersion, controllers.Finalizer)
	if err := c.Patch(ctx, cos, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("operator-controller")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Patch(ctx, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
	decide(t, "error", "disagree", name+" (operator-controller)", "standard feature set")
}

// annotateCRD sets (or, with value "", removes) OLM's generator annotation on a CRD; the test's end
// removes it.
func annotateCRD(t *testing.T, name, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	obj := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, olmlayout.GeneratorAnnotation, v)
	if err := testenv.Env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	if value == "" {
		return
	}
	t.Cleanup(func() {
		remove := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, olmlayout.GeneratorAnnotation)
		if err := testenv.Env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(remove))); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
}
