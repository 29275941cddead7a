package externalize

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func TestParseMode(t *testing.T) {
	for in, wantErr := range map[string]bool{"always": false, "oversized": false, "never": false, "": true, "Always": true, "sometimes": true} {
		t.Run(in, func(t *testing.T) {
			m, err := ParseMode(in)
			if (err != nil) != wantErr {
				t.Fatalf("ParseMode(%q) = %q, %v", in, m, err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	tests := map[string]struct {
		mode        Mode
		annotations map[string]string
		size, n     int
		want        bool
		wantErr     string
	}{
		"oversized, over":                 {mode: ModeOversized, size: 101, n: 1, want: true},
		"oversized, at the threshold":     {mode: ModeOversized, size: 100, n: 1, want: false},
		"oversized, no inline objects":    {mode: ModeOversized, size: 1000, n: 0, want: false},
		"always, small":                   {mode: ModeAlways, size: 1, n: 1, want: true},
		"never, huge":                     {mode: ModeNever, size: 1 << 30, n: 5, want: false},
		"annotation always beats never":   {mode: ModeNever, annotations: map[string]string{Annotation: "always"}, size: 1, n: 1, want: true},
		"annotation never beats always":   {mode: ModeAlways, annotations: map[string]string{Annotation: "never"}, size: 1 << 20, n: 1, want: false},
		"annotation oversized is refused": {mode: ModeAlways, annotations: map[string]string{Annotation: "oversized"}, n: 1, wantErr: `metadata.annotations[cos-externalizer.io/externalize]: Unsupported value: "oversized": supported values: "always", "never"`},
		"other annotations are ignored":   {mode: ModeOversized, annotations: map[string]string{"a": "b"}, size: 101, n: 1, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, ferr := Decide(tc.mode, 100, tc.annotations, tc.size, tc.n)
			if tc.wantErr != "" {
				if ferr == nil || ferr.Error() != tc.wantErr {
					t.Fatalf("error %v, want %s", ferr, tc.wantErr)
				}
				return
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			if d.Externalize != tc.want || d.Reason == "" {
				t.Errorf("Decide = %+v, want Externalize %v with a reason", d, tc.want)
			}
		})
	}
}

func cm(name string, data string) olmv1.ClusterObjectSetObject {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"data":     map[string]any{"k": data},
	}}
	return olmv1.ClusterObjectSetObject{Object: *u}
}

func ref(name, ns, key string) olmv1.ClusterObjectSetObject {
	return olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: name, Namespace: ns, Key: key}}
}

func TestSameContent(t *testing.T) {
	store := map[string]map[string]any{
		"s/a": cm("a", "1").Object.Object,
		"s/b": cm("b", "2").Object.Object,
	}
	resolve := func(r olmv1.ObjectSourceRef) (map[string]any, error) {
		if o, ok := store[r.Name+"/"+r.Key]; ok && (r.Namespace == "" || r.Namespace == "sys") {
			return o, nil
		}
		return nil, errors.New("not found")
	}
	phase := func(name string, objs ...olmv1.ClusterObjectSetObject) olmv1.ClusterObjectSetPhase {
		return olmv1.ClusterObjectSetPhase{Name: name, Objects: objs}
	}
	stored := []olmv1.ClusterObjectSetPhase{phase("p", ref("s", "sys", "a"), ref("s", "sys", "b"))}
	tests := map[string]struct {
		old, updated []olmv1.ClusterObjectSetPhase
		want         bool
		wantErr      bool
	}{
		"inline form of the stored refs": {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"), cm("b", "2"))}, want: true},
		"same refs, namespace defaulted": {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", ref("s", "", "a"), ref("s", "sys", "b"))}, want: true},
		"mixed inline and ref":           {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"), ref("s", "sys", "b"))}, want: true},
		"changed value":                  {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"), cm("b", "3"))}, want: false},
		"swapped order":                  {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("b", "2"), cm("a", "1"))}, want: false},
		"renamed phase":                  {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("q", cm("a", "1"), cm("b", "2"))}, want: false},
		"extra phase":                    {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"), cm("b", "2")), phase("q")}, want: false},
		"object missing":                 {old: stored, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"))}, want: false},
		"collision protection added":     {old: stored, updated: []olmv1.ClusterObjectSetPhase{{Name: "p", CollisionProtection: olmv1.CollisionProtectionNone, Objects: []olmv1.ClusterObjectSetObject{cm("a", "1"), cm("b", "2")}}}, want: false},
		"stored ref cannot be read":      {old: []olmv1.ClusterObjectSetPhase{phase("p", ref("gone", "sys", "a"))}, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"))}, wantErr: true},
		"inline on both sides, same":     {old: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"))}, updated: []olmv1.ClusterObjectSetPhase{phase("p", cm("a", "1"))}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := SameContent(tc.old, tc.updated, "sys", resolve)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("SameContent = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRewriteLastApplied(t *testing.T) {
	phases := []olmv1.ClusterObjectSetPhase{{Name: "p", Objects: []olmv1.ClusterObjectSetObject{ref("s", "sys", "k")}}}
	applied := `{"apiVersion":"olm.operatorframework.io/v1","kind":"ClusterObjectSet","metadata":{"annotations":{},"name":"x"},"spec":{"phases":[{"name":"p","objects":[{"object":{"kind":"ConfigMap","data":{"html":"<b>"}}}]}],"revision":1}}` + "\n"
	tests := map[string]struct {
		in      string
		want    string
		wantErr bool
	}{
		"phases replaced, the rest kept": {in: applied, want: `{"apiVersion":"olm.operatorframework.io/v1","kind":"ClusterObjectSet","metadata":{"annotations":{},"name":"x"},"spec":{"phases":[{"name":"p","objects":[{"ref":{"key":"k","name":"s","namespace":"sys"}}]}],"revision":1}}` + "\n"},
		"no spec: unchanged":             {in: `{"kind":"ClusterObjectSet"}`, want: `{"kind":"ClusterObjectSet"}`},
		"not JSON":                       {in: `{"kind":`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := RewriteLastApplied(tc.in, phases)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err != nil && strings.Contains(err.Error(), "kind") {
				t.Errorf("error quotes the annotation: %v", err)
			}
		})
	}
	// Deterministic: rewriting the rewritten value changes nothing.
	once, _ := RewriteLastApplied(applied, phases)
	twice, _ := RewriteLastApplied(once, phases)
	if once != twice {
		t.Error("RewriteLastApplied is not idempotent")
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(once), &v); err != nil {
		t.Fatal(err)
	}
}
