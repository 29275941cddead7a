package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// manifests is controller-gen's output for one webhook without matchConditions.
const manifests = `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: cfg
webhooks:
- admissionReviewVersions:
  - v1
  name: a.example.com
  sideEffects: None
`

const conditions = `# a comment
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: cfg
webhooks:
- name: a.example.com
  matchConditions:
  - name: first
    expression: |-
      has(object.spec) &&
        object.spec.x == 'y'
`

func TestMerge(t *testing.T) {
	want := `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: cfg
webhooks:
- admissionReviewVersions:
  - v1
  matchConditions:
  - expression: |-
      has(object.spec) &&
        object.spec.x == 'y'
    name: first
  name: a.example.com
  sideEffects: None
`
	got, err := Merge([]byte(conditions), []byte(manifests))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Fatalf("merged (-want +got):\n%s", diff)
	}
	// make manifests may run it on its own output.
	again, err := Merge([]byte(conditions), got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(again)); diff != "" {
		t.Errorf("merged twice (-want +got):\n%s", diff)
	}
	// Without conditions, controller-gen's output stays as it is.
	same, err := Merge(nil, []byte(manifests))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(manifests, string(same)); diff != "" {
		t.Errorf("rewritten without conditions (-want +got):\n%s", diff)
	}
}

func TestMergeRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		conditions, manifests, want string
	}{
		"unknown configuration": {
			strings.Replace(conditions, "name: cfg", "name: other", 1), manifests, "not in the manifests",
		},
		"unknown kind": {
			strings.Replace(conditions, "kind: Validating", "kind: Mutating", 1), manifests, "not in the manifests",
		},
		"unknown webhook": {
			strings.Replace(conditions, "- name: a.example.com", "- name: b.example.com", 1), manifests, "no webhook b.example.com",
		},
		"webhook twice": {
			conditions + "- name: a.example.com\n  matchConditions:\n  - {name: x, expression: 'true'}\n", manifests, "listed twice",
		},
		"no conditions": {
			"kind: ValidatingWebhookConfiguration\napiVersion: admissionregistration.k8s.io/v1\nmetadata: {name: cfg}\nwebhooks:\n- name: a.example.com\n",
			manifests, "no matchConditions",
		},
		"empty expression": {
			strings.Replace(conditions, "expression: |-\n      has(object.spec) &&\n        object.spec.x == 'y'", "expression: ' '", 1), manifests, "without a name or an expression",
		},
		"unknown field": {
			strings.Replace(conditions, "  - name: first", "  - name: first\n    expresion: x", 1), manifests, "unknown field",
		},
		"other conditions from a marker": {
			conditions, strings.Replace(manifests, "  name: a.example.com", "  matchConditions:\n  - expression: 'true'\n    name: marker\n  name: a.example.com", 1),
			"its marker sets matchConditions too",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Merge([]byte(tc.conditions), []byte(tc.manifests))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
