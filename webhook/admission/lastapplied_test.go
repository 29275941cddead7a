package admission

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

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
