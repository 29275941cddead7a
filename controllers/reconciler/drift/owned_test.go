package drift

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixtures are objects as a real API server (kube-apiserver 1.36) returned them: "desired" was
// applied with server-side apply by the field manager "cos-externalizer", then another client
// changed it as each name of "live" says (kubectl scale through the scale subresource, an edit, a
// merge or JSON patch, another field manager's apply).
type fixtures struct {
	Desired map[string]map[string]any `json:"desired"`
	Live    map[string]map[string]any `json:"live"`
}

func loadFixtures(t testing.TB) fixtures {
	t.Helper()
	data, err := os.ReadFile("testdata/managedfields.json")
	if err != nil {
		t.Fatal(err)
	}
	var f fixtures
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.UseNumber()
	if err := d.Decode(&f); err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]map[string]any{f.Desired, f.Live} {
		for k, o := range m {
			m[k] = normalize(o).(map[string]any)
		}
	}
	return f
}

const fieldManager = "cos-externalizer"

func TestOwnedOnRealManagedFields(t *testing.T) {
	f := loadFixtures(t)
	unchanged := Verdict{Unchanged: true}
	field := func(path string) Verdict { return Verdict{Reason: ReasonField, Field: path} }
	tests := map[string]Verdict{
		"deployment-applied":                     unchanged,
		"deployment-same-value-update":           unchanged, // a patch that changed nothing takes nothing
		"deployment-same-value-applied-by-other": unchanged, // shared ownership
		"deployment-cpu-normalized-rewrite":      unchanged, // "500m" over our "0.5": the same quantity
		"deployment-env-added-by-applier":        unchanged, // another manager's element beside ours
		"deployment-sidecar-added":               unchanged,
		"deployment-scaled":                      field("spec.replicas"),
		"deployment-force-applied-by-other":      field("spec.replicas"),
		"deployment-image-edited":                field("spec.template.spec.containers[0].image"),
		"deployment-env-value-edited":            field("spec.template.spec.containers[0].env[0].value"),
		"deployment-args-edited":                 field("spec.template.spec.containers[0].args"),
		"deployment-port-removed":                field("spec.template.spec.containers[0].ports[1]"),
		"deployment-label-removed":               field("metadata.labels.app"),
		"deployment-annotation-changed":          field("metadata.annotations.team"),
		"deployment-digest-removed":              field("metadata.annotations." + Annotation),
		"deployment-ownerref-removed":            field("metadata.ownerReferences"),
		"deployment-managedfields-wiped":         {Reason: ReasonManagedFields},
		"service-applied":                        unchanged, // ports keyed by port and a defaulted protocol
		"configmap-applied":                      unchanged, // empty labels and annotations, an empty value
		"configmap-finalizer-added":              unchanged,
		"configmap-finalizers-removed":           field("metadata.finalizers"),
		"crd-applied":                            unchanged, // versions is atomic
		"widget-applied":                         unchanged,
		"widget-tag-added":                       unchanged,
		"widget-free-stolen":                     field("spec.free"), // our node stays, its fields are the thief's
		"widget-free-removed":                    field("spec.free"), // our node stays, its fields are gone
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			live, ok := f.Live[name]
			if !ok {
				t.Fatalf("no fixture %q", name)
			}
			kind, _, _ := strings.Cut(name, "-")
			desired := f.Desired[kind]
			got := Owned(desired, live, fieldManager)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Owned (-want +got):\n%s", diff)
			}
		})
	}
	for name := range f.Live {
		if _, ok := tests[name]; !ok {
			t.Errorf("fixture %q has no case", name)
		}
	}
}

func TestUnchanged(t *testing.T) {
	f := loadFixtures(t)
	desired := f.Desired["deployment"]
	tests := map[string]struct {
		live   string
		digest string
		want   Verdict
	}{
		"the digest applied":       {live: "deployment-applied", digest: "sha256:aa", want: Verdict{Unchanged: true}},
		"another desired object":   {live: "deployment-applied", digest: "sha256:bb", want: Verdict{Reason: ReasonDigest}},
		"the annotation removed":   {live: "deployment-digest-removed", digest: "sha256:aa", want: Verdict{Reason: ReasonDigest}},
		"a field changed":          {live: "deployment-image-edited", digest: "sha256:aa", want: Verdict{Reason: ReasonField, Field: "spec.template.spec.containers[0].image"}},
		"managed fields wiped":     {live: "deployment-managedfields-wiped", digest: "sha256:aa", want: Verdict{Reason: ReasonManagedFields}},
		"annotation value changed": {live: "deployment-annotation-changed", digest: "sha256:aa", want: Verdict{Reason: ReasonField, Field: "metadata.annotations.team"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Unchanged(desired, f.Live[tc.live], fieldManager, tc.digest)); diff != "" {
				t.Errorf("Unchanged (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOwnedWhenUnsure: what the walk cannot match is not owned.
func TestOwnedWhenUnsure(t *testing.T) {
	entry := func(fields string, extra ...string) string {
		e := `{"manager":"cos-externalizer","operation":"Apply","apiVersion":"v1","fieldsV1":` + fields + `}`
		return `[` + strings.Join(append([]string{e}, extra...), ",") + `]`
	}
	live := func(mf, rest string) string {
		return `{"apiVersion":"v1","kind":"X","metadata":{"name":"x","managedFields":` + mf + `}` + rest + `}`
	}
	tests := map[string]struct {
		desired, live string
		want          Verdict
	}{
		"owned": {`{"apiVersion":"v1","spec":{"a":1,"l":[{"n":"x","v":1}],"s":["p"]}}`,
			live(entry(`{"f:spec":{"f:a":{},"f:l":{"k:{\"n\":\"x\"}":{".":{},"f:n":{},"f:v":{}}},"f:s":{"v:\"p\"":{}}}}`), `,"spec":{"a":1,"l":[{"n":"x","v":1}],"s":["p"]}`),
			Verdict{Unchanged: true}},
		"no entry of ours": {`{"apiVersion":"v1","spec":{"a":1}}`,
			live(`[{"manager":"other","operation":"Apply","apiVersion":"v1","fieldsV1":{"f:spec":{"f:a":{}}}}]`, `,"spec":{"a":1}`),
			Verdict{Reason: ReasonManagedFields}},
		"an update entry of ours only": {`{"apiVersion":"v1","spec":{"a":1}}`,
			live(`[{"manager":"cos-externalizer","operation":"Update","apiVersion":"v1","fieldsV1":{"f:spec":{"f:a":{}}}}]`, `,"spec":{"a":1}`),
			Verdict{Reason: ReasonManagedFields}},
		"two entries of ours": {`{"apiVersion":"v1","spec":{"a":1}}`,
			live(entry(`{"f:spec":{"f:a":{}}}`, `{"manager":"cos-externalizer","operation":"Apply","apiVersion":"v1","fieldsV1":{}}`), `,"spec":{"a":1}`),
			Verdict{Reason: ReasonManagedFields}},
		"applied in another version": {`{"apiVersion":"v2","spec":{"a":1}}`,
			live(entry(`{"f:spec":{"f:a":{}}}`), `,"spec":{"a":1}`),
			Verdict{Reason: ReasonManagedFields}},
		"managedFields not a list of objects": {`{"apiVersion":"v1","spec":{"a":1}}`,
			live(`["x"]`, ``), Verdict{Reason: ReasonManagedFields}},
		"fieldsV1 missing": {`{"apiVersion":"v1","spec":{"a":1}}`,
			live(`[{"manager":"cos-externalizer","operation":"Apply","apiVersion":"v1"}]`, ``), Verdict{Reason: ReasonManagedFields}},
		"a key that is not JSON": {`{"apiVersion":"v1","spec":{"l":[{"n":"x"}]}}`,
			live(entry(`{"f:spec":{"f:l":{"k:{n":{}}}}`), `,"spec":{"l":[{"n":"x"}]}`),
			Verdict{Reason: ReasonField, Field: "spec.l[0]"}},
		"an element matching two keys": {`{"apiVersion":"v1","spec":{"l":[{"port":80}]}}`,
			live(entry(`{"f:spec":{"f:l":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{},"k:{\"port\":80,\"protocol\":\"UDP\"}":{}}}}`), `,"spec":{"l":[{"port":80,"protocol":"TCP"},{"port":80,"protocol":"UDP"}]}`),
			Verdict{Reason: ReasonField, Field: "spec.l[0]"}},
		"a defaulted key field beside an element that has it": {`{"apiVersion":"v1","spec":{"l":[{"port":80},{"port":80,"protocol":"UDP"}]}}`,
			live(entry(`{"f:spec":{"f:l":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{}},"k:{\"port\":80,\"protocol\":\"UDP\"}":{".":{},"f:port":{},"f:protocol":{}}}}}`), `,"spec":{"l":[{"port":80,"protocol":"TCP"},{"port":80,"protocol":"UDP"}]}`),
			Verdict{Unchanged: true}},
		"an element without key fields": {`{"apiVersion":"v1","spec":{"l":[{"v":1}]}}`,
			live(entry(`{"f:spec":{"f:l":{"k:{\"n\":\"x\"}":{}}}}`), `,"spec":{"l":[{"n":"x","v":1}]}`),
			Verdict{Reason: ReasonField, Field: "spec.l[0]"}},
		"a list of lists in a granular list": {`{"apiVersion":"v1","spec":{"l":[[1]]}}`,
			live(entry(`{"f:spec":{"f:l":{"i:0":{}}}}`), `,"spec":{"l":[[1]]}`),
			Verdict{Reason: ReasonField, Field: "spec.l[0]"}},
		"a set element not ours": {`{"apiVersion":"v1","spec":{"s":["p","q"]}}`,
			live(entry(`{"f:spec":{"f:s":{"v:\"p\"":{}}}}`), `,"spec":{"s":["p","q"]}`),
			Verdict{Reason: ReasonField, Field: "spec.s[1]"}},
		"a number set element": {`{"apiVersion":"v1","spec":{"s":[1,2.5]}}`,
			live(entry(`{"f:spec":{"f:s":{"v:1":{},"v:2.5":{}}}}`), `,"spec":{"s":[1,2.5]}`),
			Verdict{Unchanged: true}},
		"a whole list shorter in live": {`{"apiVersion":"v1","spec":{"l":[1,2]}}`,
			live(entry(`{"f:spec":{"f:l":{}}}`), `,"spec":{"l":[1]}`),
			Verdict{Reason: ReasonField, Field: "spec.l"}},
		"a whole map missing a false value in live": {`{"apiVersion":"v1","spec":{"m":{"a":"x","b":false}}}`,
			live(entry(`{"f:spec":{"f:m":{}}}`), `,"spec":{"m":{"a":"y"}}`),
			Verdict{Reason: ReasonField, Field: "spec.m"}},
		"a whole map missing a null and empty values in live": {`{"apiVersion":"v1","spec":{"m":{"a":"x","b":null,"c":{},"d":[]}}}`,
			live(entry(`{"f:spec":{"f:m":{}}}`), `,"spec":{"m":{"a":"y"}}`),
			Verdict{Unchanged: true}},
		"status and server metadata not looked at": {`{"apiVersion":"v1","kind":"X","metadata":{"name":"x","namespace":"n","uid":"u","creationTimestamp":null},"status":{"a":1}}`,
			live(entry(`{}`), ``), Verdict{Unchanged: true}},
		"a null field": {`{"apiVersion":"v1","spec":{"a":null}}`,
			live(entry(`{"f:spec":{"f:a":{}}}`), `,"spec":{}`), Verdict{Unchanged: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Owned(obj(t, tc.desired), obj(t, tc.live), fieldManager)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Owned (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	if got, want := Digest([]byte("{}")), "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"; got != want {
		t.Errorf("Digest = %s, want %s", got, want)
	}
}

// metadataOnly is live as a metadata-only cache holds it: apiVersion, kind and metadata.
func metadataOnly(live map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"apiVersion", "kind", "metadata"} {
		if v, ok := live[k]; ok {
			out[k] = v
		}
	}
	return out
}

// checkMetadataVerdict is UnchangedMetadata's promise for one object: without needsContent, its
// verdict on live's metadata is Unchanged's on the whole of live; with it, the metadata alone said
// nothing changed.
func checkMetadataVerdict(t *testing.T, desired, live map[string]any, digest string) (needsContent bool) {
	t.Helper()
	whole := Unchanged(desired, live, fieldManager, digest)
	got, needsContent := UnchangedMetadata(desired, metadataOnly(live), fieldManager, digest)
	if needsContent {
		if got.Unchanged {
			t.Errorf("needs the content, yet Unchanged")
		}
		return true
	}
	if diff := cmp.Diff(whole, got); diff != "" {
		t.Errorf("UnchangedMetadata differs from Unchanged (-whole +metadata):\n%s", diff)
	}
	return false
}

// TestUnchangedMetadata: on real objects and on the walk's corner cases, the verdict on the metadata
// is the verdict on the whole object, or says that it needs the content (fields of ours owned as a
// whole outside metadata).
func TestUnchangedMetadata(t *testing.T) {
	f := loadFixtures(t)
	desired := f.Desired["deployment"]
	needed := map[string]bool{}
	for name, live := range f.Live {
		if !strings.HasPrefix(name, "deployment") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			needed[name] = checkMetadataVerdict(t, desired, live, "sha256:aa")
		})
	}
	// A Deployment's container args are an atomic list: the applied one needs its content.
	if !needed["deployment-applied"] {
		t.Errorf("deployment-applied: the atomic list of args was not deferred to the content")
	}
	for name, tc := range map[string]struct {
		desired, live string
		needsContent  bool
	}{
		"granular maps only": {`{"apiVersion":"v1","metadata":{"labels":{"a":"b"}},"data":{"k":"v"}}`,
			`{"apiVersion":"v1","kind":"X","metadata":{"labels":{"a":"b"},"managedFields":[{"manager":"cos-externalizer","operation":"Apply","apiVersion":"v1","fieldsV1":{"f:data":{"f:k":{}},"f:metadata":{"f:labels":{"f:a":{}}}}}]},"data":{"k":"v"}}`, false},
		"a whole list outside metadata": {`{"apiVersion":"v1","rules":[{"verbs":["get"]}]}`,
			`{"apiVersion":"v1","kind":"X","metadata":{"managedFields":[{"manager":"cos-externalizer","operation":"Apply","apiVersion":"v1","fieldsV1":{"f:rules":{}}}]},"rules":[{"verbs":["get"]}]}`, true},
		"a whole list outside metadata, shorter in live": {`{"apiVersion":"v1","rules":[1,2]}`,
			`{"apiVersion":"v1","kind":"X","metadata":{"managedFields":[{"manager":"cos-externalizer","operation":"Apply","apiVersion":"v1","fieldsV1":{"f:rules":{}}}]},"rules":[1]}`, true},
		"a whole list another manager took a part of": {`{"apiVersion":"v1","spec":{"m":{"a":1}}}`,
			`{"apiVersion":"v1","kind":"X","metadata":{"managedFields":[{"manager":"cos-externalizer","operation":"Apply","apiVersion":"v1","fieldsV1":{"f:spec":{"f:m":{}}}},{"manager":"x","operation":"Update","apiVersion":"v1","fieldsV1":{"f:spec":{"f:m":{"f:a":{}}}}}]},"spec":{"m":{"a":2}}}`, false},
		"a whole map in metadata, missing in live": {`{"apiVersion":"v1","metadata":{"annotations":{"x":"1"}}}`,
			`{"apiVersion":"v1","kind":"X","metadata":{"managedFields":[{"manager":"cos-externalizer","operation":"Apply","apiVersion":"v1","fieldsV1":{"f:metadata":{"f:annotations":{}}}}]}}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			live := obj(t, tc.live)
			md := live["metadata"].(map[string]any)
			md["annotations"] = map[string]any{Annotation: "sha256:aa"}
			if got := checkMetadataVerdict(t, obj(t, tc.desired), live, "sha256:aa"); got != tc.needsContent {
				t.Errorf("needsContent = %v, want %v", got, tc.needsContent)
			}
		})
	}
}
