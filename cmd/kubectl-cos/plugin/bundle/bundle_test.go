package bundle

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// brief is what the parse tests compare of an object: where it came from and who it is.
type brief struct {
	Source Source
	Who    string
}

func briefs(objs []Object) []brief {
	var out []brief
	for _, o := range objs {
		out = append(out, brief{o.Source, errorObject(o.Object)})
	}
	return out
}

func src(doc, line int) Source { return Source{File: "f.yaml", Document: doc, Line: line, Item: -1} }

func TestParse(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []brief
		wantErr []string
	}{
		"one object": {
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
			want: []brief{{src(1, 1), "ConfigMap a"}},
		},
		"documents, empty ones skipped, leading separator": {
			in:   "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns1}\n---\n# only a comment\n---\n\n---\nnull\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n",
			want: []brief{{src(1, 2), "ConfigMap ns1/a"}, {src(5, 12), "Secret b"}},
		},
		"separator with a comment": {
			in:      "a: 1\n--- # next\napiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
			want:    []brief{{src(2, 3), "Namespace x"}},
			wantErr: []string{"f.yaml:1: document 1: apiVersion: Required value"},
		},
		"JSON document": {
			in:   `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"}}`,
			want: []brief{{src(1, 1), "ConfigMap j"}},
		},
		"List flattened": {
			in:   "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n",
			want: []brief{{Source{"f.yaml", 1, 1, 0}, "ConfigMap a"}, {Source{"f.yaml", 1, 1, 1}, "ConfigMap b"}},
		},
		"List item not an object": {
			in:      "apiVersion: v1\nkind: ConfigMapList\nitems:\n- 3\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n",
			want:    []brief{{Source{"f.yaml", 1, 1, 1}, "ConfigMap b"}},
			wantErr: []string{"f.yaml:1: document 1, items[0]: the item is a number, not an object"},
		},
		"missing kind, named by its metadata": {
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: v1\nmetadata: {name: nokind}\n",
			want:    []brief{{src(1, 1), "ConfigMap ok"}},
			wantErr: []string{"f.yaml:5: document 2 (object nokind): kind: Required value"},
		},
		"kind not a string": {
			in:      "apiVersion: v1\nkind: [a]\n",
			wantErr: []string{"f.yaml:1: document 1: kind: Invalid value: must be a string, not a list"},
		},
		"empty apiVersion": {
			in:      "apiVersion: ''\nkind: ConfigMap\nmetadata: {name: e}\n",
			wantErr: []string{"f.yaml:1: document 1 (ConfigMap e): apiVersion: Required value"},
		},
		"metadata not a mapping": {
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: secret-value\n",
			wantErr: []string{"f.yaml:1: document 1 (ConfigMap): metadata: Invalid value: must be a mapping, not a string"},
		},
		"a scalar document": {
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\njust-a-string\n",
			want:    []brief{{src(1, 1), "ConfigMap a"}},
			wantErr: []string{"f.yaml:5: document 2: the document is a string, not an object (a mapping with apiVersion, kind and metadata)"},
		},
		"a list document": {
			in:      "- a\n- b\n",
			wantErr: []string{"f.yaml:1: document 1: the document is a list, not an object (a mapping with apiVersion, kind and metadata)"},
		},
		"bad YAML, line counted in the file": {
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\n  bad: indent: here\n",
			want:    []brief{{src(1, 1), "ConfigMap a"}},
			wantErr: []string{"f.yaml:5: document 2: not valid YAML: line 7: mapping values are not allowed in this context"},
		},
		"leading comments: the document starts at its content, YAML lines still counted in the file": {
			in:      "# a\n\n# b\napiVersion: v1\nkind: ConfigMap\n  bad: indent: here\n",
			wantErr: []string{"f.yaml:4: document 1: not valid YAML: line 6: mapping values are not allowed in this context"},
		},
		"bad separator": {
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n--- {apiVersion: v1}\n",
			want:    []brief{{src(1, 1), "ConfigMap a"}},
			wantErr: []string{`f.yaml:4: document 2: a document separator line may hold only "---" and a comment`},
		},
		"several problems reported together": {
			in:      "kind: A\n---\nkind: B\n",
			wantErr: []string{"f.yaml:1: document 1 (A): apiVersion: Required value", "f.yaml:3: document 2 (B): apiVersion: Required value"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs, err := Parse("f.yaml", []byte(tc.in))
			if diff := cmp.Diff(tc.want, briefs(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErr, errorLines(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if err != nil && strings.Contains(err.Error(), "secret-value") {
				t.Errorf("an error quotes a value: %v", err)
			}
		})
	}
}

// errorLines returns the message of every problem in err.
func errorLines(err error) []string {
	if err == nil {
		return nil
	}
	var es Errors
	if !errors.As(err, &es) {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Error())
	}
	return out
}

func TestBuild(t *testing.T) {
	const mixed = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
---
apiVersion: v1
kind: Namespace
metadata: {name: app}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec: {group: example.com, scope: Cluster, names: {kind: Widget, plural: widgets}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: global}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
`
	// layout is the phases of the result: phase name to "Kind namespace/name" of each object.
	type layout [][]string
	layoutOf := func(c *olmv1.ClusterObjectSet) layout {
		var out layout
		for _, p := range c.Spec.Phases {
			row := []string{p.Name}
			for _, o := range p.Objects {
				row = append(row, errorObject(&o.Object))
			}
			out = append(out, row)
		}
		return out
	}
	tests := map[string]struct {
		in      string
		opts    Options
		want    layout
		wantErr []string
	}{
		"producer order, namespace given, cluster-scoped kinds and CRD scopes respected": {
			in:   mixed,
			opts: Options{Name: "app", Revision: 1, Namespace: "app"},
			want: layout{
				{"namespaces", "Namespace app"},
				{"configuration", "ConfigMap app/settings"},
				{"crds", "CustomResourceDefinition widgets.example.com"},
				{"roles", "ClusterRole reader"},
				{"deploy", "Deployment app/web", "Widget global"},
			},
		},
		"no namespace for namespaced objects": {
			in:   mixed,
			opts: Options{Name: "app", Revision: 1},
			wantErr: []string{
				"f.yaml:1: document 1 (Deployment web): metadata.namespace: Required value: Deployment is namespaced; set metadata.namespace or pass --namespace",
				"f.yaml:22: document 6 (ConfigMap settings): metadata.namespace: Required value: ConfigMap is namespaced; set metadata.namespace or pass --namespace",
			},
		},
		"duplicates": {
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
			opts:    Options{Name: "app", Revision: 1, Namespace: "ns1"},
			wantErr: []string{"f.yaml:5: document 2 (ConfigMap ns1/a): Duplicate value: the same object as f.yaml:1: document 1"},
		},
		"a namespace that YAML reads as a boolean": {
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\n",
			opts:    Options{Name: "app", Revision: 1, Namespace: "ns1"},
			wantErr: []string{"f.yaml:1: document 1 (ConfigMap a): metadata: Invalid value: json: cannot unmarshal bool into Go struct field ObjectMeta.namespace of type string"},
		},
		"over 50 objects split": {
			in:   manyConfigMaps(51),
			opts: Options{Name: "many", Revision: 1, Namespace: "n"},
			want: func() layout {
				first := []string{"configuration"}
				for i := range 50 {
					first = append(first, "ConfigMap n/cm-"+strconv.Itoa(i))
				}
				return layout{first, {"configuration-2", "ConfigMap n/cm-50"}}
			}(),
		},
		"invalid object metadata, located": {
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: ns1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: ns1, labels: {\"a b\": c}}\n",
			opts:    Options{Name: "app", Revision: 1},
			wantErr: []string{"f.yaml:5: document 2 (ConfigMap ns1/bad): metadata.labels: Invalid value: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
		},
		"objects need a name": {
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: x-, namespace: ns1}\n---\napiVersion: v1\nkind: Namespace\n",
			opts:    Options{Name: "app", Revision: 1},
			wantErr: []string{"f.yaml:1: document 1 (ConfigMap): metadata.name: Required value: objects of a ClusterObjectSet are applied by name", "f.yaml:5: document 2 (Namespace): metadata.name: Required value: objects of a ClusterObjectSet are applied by name"},
		},
		"bad options name their flags": {
			in:   "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
			opts: Options{Name: "Bad_Name", Revision: 0, ProgressDeadlineMinutes: 5},
			wantErr: []string{
				"--name: Invalid value: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
			},
		},
		"bad spec values name their flags": {
			in:   "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
			opts: Options{Name: "ok", Revision: 0, ProgressDeadlineMinutes: 5, Probes: []olmv1.ProgressionProbe{{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Kind: "Pod"}}, Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: "a..b", Value: "v"}}}}}},
			wantErr: []string{
				"--progress-deadline-minutes: Invalid value: should be greater than or equal to 10",
				"--revision: Invalid value: should be greater than or equal to 1",
				"--progression-probe[0].assertions[0].fieldValue.fieldPath: Invalid value: must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character.",
			},
		},
		"nothing to build": {
			in:      "# empty\n",
			opts:    Options{Name: "empty", Revision: 1},
			wantErr: []string{ErrNoObjects.Error()},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs, err := Parse("f.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(objs)
			got, err := Build(objs, tc.opts)
			if diff := cmp.Diff(tc.wantErr, errorLines(err)); diff != "" {
				t.Fatalf("errors (-want +got):\n%s", diff)
			}
			if after, _ := json.Marshal(objs); string(before) != string(after) {
				t.Error("Build changed its input")
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, layoutOf(got)); diff != "" {
				t.Errorf("phases (-want +got):\n%s", diff)
			}
			if got.Name != tc.opts.Name || got.Spec.Revision != tc.opts.Revision || got.Spec.LifecycleState != olmv1.LifecycleStateActive ||
				got.Spec.CollisionProtection != olmv1.CollisionProtectionPrevent || got.Kind != olmv1.ClusterObjectSetKind {
				t.Errorf("ClusterObjectSet fields: %+v %+v", got.ObjectMeta, got.Spec)
			}
		})
	}
}

func manyConfigMaps(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-" + strconv.Itoa(i) + "}\n")
	}
	return b.String()
}

func TestParseProbe(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    olmv1.ProgressionProbe
		wantErr string
	}{
		"kind and condition": {
			in: "kind=cert-manager.io/Certificate;condition=Ready=True",
			want: olmv1.ProgressionProbe{
				Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}},
				Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "True"}}},
			},
		},
		"core kind, fields and value": {
			in: " kind=Pod ; fields=spec.replicas==status.readyReplicas; value=status.phase=Running ",
			want: olmv1.ProgressionProbe{
				Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Kind: "Pod"}},
				Assertions: []olmv1.Assertion{
					{Type: olmv1.AssertionTypeFieldsEqual, FieldsEqual: olmv1.FieldsEqualProbe{FieldA: "spec.replicas", FieldB: "status.readyReplicas"}},
					{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: "status.phase", Value: "Running"}},
				},
			},
		},
		"label selector with equality only": {
			in: "selector=app=web,tier=front;condition=Ready=False",
			want: olmv1.ProgressionProbe{
				Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}},
				Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "False"}}},
			},
		},
		"label selector mixing both forms becomes expressions": {
			in: "selector=b=2,a in (x),c=3;condition=Ready=True",
			want: olmv1.ProgressionProbe{
				Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeLabel, Label: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "b", Operator: metav1.LabelSelectorOpIn, Values: []string{"2"}},
					{Key: "c", Operator: metav1.LabelSelectorOpIn, Values: []string{"3"}},
					{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"x"}},
				}}},
				Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Ready", Status: "True"}}},
			},
		},
		"JSON": {
			in: `{"selector":{"type":"GroupKind","groupKind":{"group":"apps","kind":"Deployment"}},"assertions":[{"type":"ConditionEqual","conditionEqual":{"type":"Available","status":"True"}}]}`,
			want: olmv1.ProgressionProbe{
				Selector:   olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Group: "apps", Kind: "Deployment"}},
				Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeConditionEqual, ConditionEqual: olmv1.ConditionEqualProbe{Type: "Available", Status: "True"}}},
			},
		},
		"JSON with an unknown field":  {in: `{"selectr":{}}`, wantErr: `not a valid progression probe as JSON: json: unknown field "selectr"`},
		"no selector":                 {in: "condition=Ready=True", wantErr: "no selector: give kind=GROUP/KIND or selector=LABEL-SELECTOR"},
		"two selectors":               {in: "kind=Pod;selector=a=b;condition=Ready=True", wantErr: "more than one selector: give one kind= or selector="},
		"no assertion":                {in: "kind=Pod", wantErr: "no assertion: give condition=, fields= or value="},
		"unknown key":                 {in: "kind=Pod;status=Ready", wantErr: `"status=Ready": unknown key "status"; want kind, selector, condition, fields or value`},
		"no equals":                   {in: "kind", wantErr: `"kind": want KEY=VALUE, with KEY one of kind, selector, condition, fields, value`},
		"condition without status":    {in: "kind=Pod;condition=Ready", wantErr: `"condition=Ready": want condition=TYPE=True or condition=TYPE=False`},
		"fields without ==":           {in: "kind=Pod;fields=a=b", wantErr: `"fields=a=b": want fields=PATH==PATH`},
		"value without value":         {in: "kind=Pod;value=status.phase", wantErr: `"value=status.phase": want value=PATH=VALUE`},
		"empty kind":                  {in: "kind=apps/;condition=A=True", wantErr: `"kind=apps/": want kind=GROUP/KIND or kind=KIND`},
		"bad label selector":          {in: "selector=a in b;condition=A=True", wantErr: `"selector=a in b": not a label selector: `},
		"value keeps its equal signs": {in: "kind=Pod;value=metadata.name=a=b", want: olmv1.ProgressionProbe{Selector: olmv1.ObjectSelector{Type: olmv1.SelectorTypeGroupKind, GroupKind: metav1.GroupKind{Kind: "Pod"}}, Assertions: []olmv1.Assertion{{Type: olmv1.AssertionTypeFieldValue, FieldValue: olmv1.FieldValueProbe{FieldPath: "metadata.name", Value: "a=b"}}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseProbe(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
