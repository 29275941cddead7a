// Package builders makes ClusterObjectSets and the objects inside them for tests.
package builders

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/plugin/phasesort"
	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// Option changes a ClusterObjectSet under construction.
type Option func(*olmv1.ClusterObjectSet)

// COS returns an Active revision-1 ClusterObjectSet with collision protection Prevent and no phases,
// changed by opts in order.
func COS(name string, opts ...Option) *olmv1.ClusterObjectSet {
	c := &olmv1.ClusterObjectSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: olmv1.ClusterObjectSetSpec{
			LifecycleState:      olmv1.LifecycleStateActive,
			Revision:            1,
			CollisionProtection: olmv1.CollisionProtectionPrevent,
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithRevision sets spec.revision.
func WithRevision(n int64) Option { return func(c *olmv1.ClusterObjectSet) { c.Spec.Revision = n } }

// WithLifecycleState sets spec.lifecycleState.
func WithLifecycleState(s olmv1.LifecycleState) Option {
	return func(c *olmv1.ClusterObjectSet) { c.Spec.LifecycleState = s }
}

// WithCollisionProtection sets spec.collisionProtection.
func WithCollisionProtection(p olmv1.CollisionProtection) Option {
	return func(c *olmv1.ClusterObjectSet) { c.Spec.CollisionProtection = p }
}

// WithProgressDeadline sets spec.progressDeadlineMinutes.
func WithProgressDeadline(minutes int32) Option {
	return func(c *olmv1.ClusterObjectSet) { c.Spec.ProgressDeadlineMinutes = minutes }
}

// WithProbes sets spec.progressionProbes.
func WithProbes(p ...olmv1.ProgressionProbe) Option {
	return func(c *olmv1.ClusterObjectSet) { c.Spec.ProgressionProbes = p }
}

// WithLabels merges labels into metadata.labels.
func WithLabels(kv map[string]string) Option {
	return func(c *olmv1.ClusterObjectSet) { c.Labels = merged(c.Labels, kv) }
}

// WithAnnotations merges annotations into metadata.annotations.
func WithAnnotations(kv map[string]string) Option {
	return func(c *olmv1.ClusterObjectSet) { c.Annotations = merged(c.Annotations, kv) }
}

// merged is dst with kv's entries set, in a new map when dst is nil.
func merged(dst, kv map[string]string) map[string]string {
	if dst == nil {
		dst = make(map[string]string, len(kv))
	}
	maps.Copy(dst, kv)
	return dst
}

// WithPhase appends a phase.
func WithPhase(name string, objs ...olmv1.ClusterObjectSetObject) Option {
	return func(c *olmv1.ClusterObjectSet) {
		c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: name, Objects: objs})
	}
}

// WithPhases appends phases.
func WithPhases(ps ...olmv1.ClusterObjectSetPhase) Option {
	return func(c *olmv1.ClusterObjectSet) { c.Spec.Phases = append(c.Spec.Phases, ps...) }
}

// Inline wraps an object as an inline phase member.
func Inline(o *unstructured.Unstructured) olmv1.ClusterObjectSetObject {
	return olmv1.ClusterObjectSetObject{Object: *o.DeepCopy()}
}

// Ref makes a phase member that references a Secret key.
func Ref(name, namespace, key string) olmv1.ClusterObjectSetObject {
	return olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: name, Namespace: namespace, Key: key}}
}

// ConfigMap returns a ConfigMap object with the given data.
func ConfigMap(namespace, name string, data map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(namespace)
	u.SetName(name)
	if data != nil {
		d := map[string]any{}
		for k, v := range data {
			d[k] = v
		}
		u.Object["data"] = d
	}
	return u
}

// CRD returns a namespaced CustomResourceDefinition of kind Kind in group, served and stored as v1,
// with a schema that keeps any field. The plural is the lower-cased kind followed by "s".
func CRD(group, kind string) *unstructured.Unstructured {
	plural := strings.ToLower(kind) + "s"
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName(plural + "." + group)
	return u
}

// InlineConfigMaps returns n inline ConfigMaps named <prefix>-<i> in namespace.
func InlineConfigMaps(namespace, prefix string, n int) []olmv1.ClusterObjectSetObject {
	out := make([]olmv1.ClusterObjectSetObject, n)
	for i := range n {
		out[i] = Inline(ConfigMap(namespace, fmt.Sprintf("%s-%d", prefix, i), map[string]string{"i": fmt.Sprint(i)}))
	}
	return out
}

// FromBundle turns the objects of a bundle into an inline ClusterObjectSet: objects sorted into the
// producer phase order, phases over the API limit split, and namespaced objects without a namespace
// put into namespace. The objects are copied; the input is not changed.
func FromBundle(name string, objs []*unstructured.Unstructured, namespace string, opts ...Option) (*olmv1.ClusterObjectSet, error) {
	placed := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		o = o.DeepCopy()
		if o.GetNamespace() == "" && namespace != "" && !phasesort.IsClusterScoped(o.GroupVersionKind().GroupKind()) {
			o.SetNamespace(namespace)
		}
		placed = append(placed, o)
	}
	phases, err := phasesort.Sort(placed, olmv1.MaxObjectsPerPhase)
	if err != nil {
		return nil, err
	}
	if len(phases) > olmv1.MaxPhases {
		return nil, fmt.Errorf("bundle needs %d phases, more than the %d a ClusterObjectSet may have", len(phases), olmv1.MaxPhases)
	}
	c := COS(name)
	for _, p := range phases {
		members := make([]olmv1.ClusterObjectSetObject, len(p.Objects))
		for i, o := range p.Objects {
			members[i] = olmv1.ClusterObjectSetObject{Object: *o}
		}
		c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: p.Name, Objects: members})
	}
	// Options apply after the bundle's phases, so WithPhase adds phases after them.
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BundleDir returns the folder of a real third-party test bundle: $COS_TESTDATA_DIR/<name> when that
// variable is set, else bin/testdata/bundles/<name> in the repository, where `make testdata` puts the
// bundles pinned in hack/tools/testdata/go.mod (the prometheus-operator CRDs and the Argo CD install,
// taken from those projects' Go module zips). A missing folder is an error that says how to get it.
// The tests of pure packages read excerpts instead (Excerpt); benchmarks on the bundles skip without
// them; integration tests fail without them.
func BundleDir(name string) (string, error) {
	base := os.Getenv("COS_TESTDATA_DIR")
	hint := "COS_TESTDATA_DIR is set; unset it to use the bundles of `make testdata`"
	if base == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			return "", err
		}
		base = filepath.Join(root, "bin", "testdata", "bundles")
		hint = "run `make testdata` to fetch the test bundles"
	}
	dir := filepath.Join(base, name)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("test bundle %s: %w (%s)", name, err, hint)
	}
	return dir, nil
}

// Bundle reads a third-party test bundle and turns it into an inline ClusterObjectSet (see FromBundle).
func Bundle(cosName, bundle, namespace string, opts ...Option) (*olmv1.ClusterObjectSet, error) {
	dir, err := BundleDir(bundle)
	if err != nil {
		return nil, err
	}
	return fromDir(cosName, dir, namespace, opts...)
}

// Excerpt is Bundle for the excerpt of a bundle kept in the repository (test/builders/testdata/excerpts:
// a few of its objects, files copied unchanged), for the tests of pure packages, which must pass in a
// fresh clone without `make testdata`. The bundles themselves are for benchmarks and the integration tests.
func Excerpt(cosName, bundle, namespace string, opts ...Option) (*olmv1.ClusterObjectSet, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	return fromDir(cosName, filepath.Join(root, "test", "builders", "testdata", "excerpts", bundle), namespace, opts...)
}

func fromDir(cosName, dir, namespace string, opts ...Option) (*olmv1.ClusterObjectSet, error) {
	objs, err := manifests.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	return FromBundle(cosName, objs, namespace, opts...)
}
