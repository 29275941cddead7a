package phasedigest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
)

// fixturePhase is a phase with what an encoder could get wrong: HTML characters (escaped by
// encoding/json), an integer and a fraction, nested lists and unsorted keys.
func fixturePhase() []map[string]any {
	return []map[string]any{
		{"kind": "ConfigMap", "apiVersion": "v1", "metadata": map[string]any{"namespace": "shop", "name": "web"},
			"data": map[string]any{"page": `<a href="x">&</a>`}},
		{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "shop", "labels": map[string]any{"app": "web"}},
			"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "web", "image": "nginx:1.27",
					"resources": map[string]any{"limits": map[string]any{"cpu": 0.5}}}}}}}},
	}
}

// goldenJSON is the fixture phase as upstream's computePhaseDigest marshals it, written out by hand
// from its definition: json.Marshal of {"name": "deploy", "objects": [...]}.
const goldenJSON = `{"name":"deploy","objects":[` +
	`{"apiVersion":"v1","data":{"page":"\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e"},"kind":"ConfigMap","metadata":{"name":"web","namespace":"shop"}},` +
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"web"},"name":"web","namespace":"shop"},` +
	`"spec":{"replicas":3,"template":{"spec":{"containers":[{"image":"nginx:1.27","name":"web","resources":{"limits":{"cpu":0.5}}}]}}}}]}`

// goldenDigest is sha256 of goldenJSON (printf '%s' "$goldenJSON" | sha256sum).
const goldenDigest = "sha256:afc5b7908942f92c9f192213b0d6c7af11142e179e88e90f48b1b3b925a072b6"

func TestPhaseDigestGolden(t *testing.T) {
	sum := sha256.Sum256([]byte(goldenJSON))
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != goldenDigest {
		t.Fatalf("the golden JSON hashes to %s, not the golden digest", got)
	}
	got, err := Of("deploy", fixturePhase())
	if err != nil {
		t.Fatal(err)
	}
	if got != goldenDigest {
		t.Errorf("PhaseDigest = %s, want %s", got, goldenDigest)
	}
}

// upstreamDigest repeats upstream's computation with its own types: the objects are
// *unstructured.Unstructured (client.Object there), marshalled through their MarshalJSON.
func upstreamDigest(t testing.TB, name string, objects []map[string]any) string {
	t.Helper()
	objs := make([]*unstructured.Unstructured, len(objects))
	for i, o := range objects {
		objs[i] = &unstructured.Unstructured{Object: o}
	}
	data, err := json.Marshal(map[string]any{"name": name, "objects": objs})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestPhaseDigestMatchesUpstream(t *testing.T) {
	phases := map[string][]map[string]any{
		"fixture":       fixturePhase(),
		"empty phase":   {},
		"one ConfigMap": {{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}}},
	}
	for _, bundle := range []string{"argocd-install", "prometheus-operator-crds"} {
		cos, err := builders.Excerpt("digest", bundle, "ns")
		if err != nil {
			t.Fatal(err)
		}
		for name, objs := range phaseObjects(cos) {
			phases[bundle+" "+name] = objs
		}
	}
	for name, objs := range phases {
		t.Run(name, func(t *testing.T) {
			got, err := Of("p", objs)
			if err != nil {
				t.Fatal(err)
			}
			if want := upstreamDigest(t, "p", objs); got != want {
				t.Errorf("PhaseDigest = %s, upstream's computation gives %s", got, want)
			}
		})
	}
}

// BenchmarkPhaseDigest digests the phases of the real bundles, and checks each digest against
// upstream's computation, as TestPhaseDigestMatchesUpstream checks their excerpts'. It skips without
// `make testdata`.
func BenchmarkPhaseDigest(b *testing.B) {
	for _, bundle := range []string{"argocd-install", "prometheus-operator-crds"} {
		b.Run(bundle, func(b *testing.B) {
			if _, err := builders.BundleDir(bundle); err != nil {
				b.Skip(err)
			}
			cos, err := builders.Bundle("digest", bundle, "ns")
			if err != nil {
				b.Fatal(err)
			}
			phases := phaseObjects(cos)
			for name, objs := range phases {
				got, err := Of("p", objs)
				if err != nil {
					b.Fatal(err)
				}
				if want := upstreamDigest(b, "p", objs); got != want {
					b.Errorf("phase %s: PhaseDigest = %s, upstream's computation gives %s", name, got, want)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, objs := range phases {
					if _, err := Of("p", objs); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// phaseObjects maps the phases of a ClusterObjectSet to their inline objects.
func phaseObjects(cos *olmv1.ClusterObjectSet) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, p := range cos.Spec.Phases {
		objs := make([]map[string]any, len(p.Objects))
		for i, o := range p.Objects {
			objs[i] = o.Object.Object
		}
		out[p.Name] = objs
	}
	return out
}

func TestDigestMatches(t *testing.T) {
	phase := fixturePhase()
	changed := fixturePhase()
	changed[0]["data"] = map[string]any{"page": "other"}
	legacy, err := Legacy(phase)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		stored  string
		name    string
		objects []map[string]any
		want    bool
	}{
		"upstream form":                     {stored: goldenDigest, name: "deploy", objects: phase, want: true},
		"form of earlier releases":          {stored: legacy, name: "deploy", objects: phase, want: true},
		"upstream form, content changed":    {stored: goldenDigest, name: "deploy", objects: changed},
		"form of earlier releases, changed": {stored: legacy, name: "deploy", objects: changed},
		"upstream form, phase renamed":      {stored: goldenDigest, name: "other", objects: phase},
		"objects reordered":                 {stored: goldenDigest, name: "deploy", objects: []map[string]any{phase[1], phase[0]}},
		"garbage":                           {stored: "sha256:00", name: "deploy", objects: phase},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Matches(tc.stored, tc.name, tc.objects)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("DigestMatches = %v, want %v", got, tc.want)
			}
		})
	}
	if !strings.HasPrefix(legacy, "sha256:") || legacy == goldenDigest {
		t.Errorf("legacy digest %s must differ from the upstream form", legacy)
	}
}
