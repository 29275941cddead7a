package olmlayout

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
)

// TestDecideOnOLMManifests: the decision on clusters holding what OLM's own release renders
// (testdata/README.md), in each of its layouts, observed as --rollout=auto reads a cluster: the
// ClusterExtension CRD (served, its feature set), the ClusterObjectSet CRD (whose), operator-controller's
// gate, object-controller's Deployment. Each of OLM's Deployments runs as the ServiceAccount of its
// own name in Namespace: the identities the webhooks name.
func TestDecideOnOLMManifests(t *testing.T) {
	ours := filepath.Join("..", "..", "config", "crd", "bases", "olm.operatorframework.io_clusterobjectsets.yaml")
	for name, tc := range map[string]struct {
		files  []string
		want   Observations
		layout Layout
		errs   []string // the error names each; none: no error
	}{
		"standard OLM": {
			files:  []string{"standard.yaml"},
			want:   Observations{ClusterExtensionServed: true, FeatureSet: "standard", ClusterObjectSetCRD: CRDAbsent, Gate: GateOff, ObjectController: Absent},
			layout: LayoutNone,
		},
		"standard OLM and our CRD": {
			files:  []string{"standard.yaml", ours},
			want:   Observations{ClusterExtensionServed: true, FeatureSet: "standard", ClusterObjectSetCRD: CRDOther, Gate: GateOff, ObjectController: Absent},
			layout: LayoutNone,
		},
		"experimental OLM, the reconciler in operator-controller": {
			files:  []string{"experimental.yaml", "clusterobjectsets-crd.yaml"},
			want:   Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOLM, Gate: GateOn, ObjectController: Absent},
			layout: LayoutOperatorController,
		},
		"experimental OLM, object-controller beside operator-controller": {
			files:  []string{"experimental.yaml", "clusterobjectsets-crd.yaml", "object-controller.yaml"},
			want:   Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOLM, Gate: GateOn, ObjectController: Present},
			layout: LayoutObjectController,
		},
		"object-controller alone": {
			files:  []string{"clusterobjectsets-crd.yaml", "object-controller.yaml"},
			want:   Observations{ClusterObjectSetCRD: CRDOLM, ObjectController: Present},
			layout: LayoutObjectController,
		},
		"experimental OLM with our CRD in place of its own": {
			files: []string{"experimental.yaml", ours, "object-controller.yaml"},
			want:  Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOther, Gate: GateOn, ObjectController: Present},
			errs:  []string{"disagree", "object-controller's Deployment", "BoxcutterRuntime on", "not OLM's"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			for _, f := range tc.files {
				if !strings.Contains(f, string(filepath.Separator)) {
					f = filepath.Join("testdata", f)
				}
				objs = append(objs, readManifests(t, f)...)
			}
			got := observe(t, objs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("observations (-want +got):\n%s", diff)
			}
			d, ok := decide(t, got, tc.errs)
			if ok && d.Layout != tc.layout || d.RollOut != (tc.layout == LayoutNone) {
				t.Errorf("Decide = %+v, want layout %q", d, tc.layout)
			}
		})
	}
}

// observe is what --rollout=auto reads of a cluster holding objs.
func observe(t *testing.T, objs []runtime.Object) Observations {
	t.Helper()
	o := Observations{ClusterObjectSetCRD: CRDAbsent, ObjectController: Absent}
	for _, obj := range objs {
		switch obj := obj.(type) {
		case *apiextensionsv1.CustomResourceDefinition:
			switch obj.Name {
			case "clusterextensions.olm.operatorframework.io":
				o.ClusterExtensionServed = obj.Spec.Names.Kind == "ClusterExtension"
				o.FeatureSet = obj.Annotations[GeneratorAnnotation]
			case "clusterobjectsets.olm.operatorframework.io":
				o.ClusterObjectSetCRD = CRDOriginOf(obj.Annotations)
			}
		case *appsv1.Deployment:
			if obj.Namespace != Namespace {
				t.Errorf("Deployment %s in namespace %q, want %s", obj.Name, obj.Namespace, Namespace)
			}
			if sa := obj.Spec.Template.Spec.ServiceAccountName; sa != obj.Name {
				t.Errorf("Deployment %s runs as ServiceAccount %q, want its own name", obj.Name, sa)
			}
			switch obj.Name {
			case OperatorControllerDeployment:
				o.Gate = DeploymentGate(obj, BoxcutterRuntimeGate)
			case ObjectControllerDeployment:
				o.ObjectController = Present
			default:
				t.Errorf("unexpected Deployment %s", obj.Name)
			}
		}
	}
	return o
}

// readManifests decodes the CRDs and Deployments of a multi-document YAML file.
func readManifests(t *testing.T, path string) []runtime.Object {
	t.Helper()
	objs, err := manifests.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, u := range objs {
		var obj runtime.Object
		switch u.GetKind() {
		case "CustomResourceDefinition":
			obj = &apiextensionsv1.CustomResourceDefinition{}
		case "Deployment":
			obj = &appsv1.Deployment{}
		default:
			t.Fatalf("%s: unexpected kind %s", path, u.GetKind())
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, obj)
	}
	return out
}
