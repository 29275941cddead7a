package cosdiff

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func obj(apiVersion, kind, ns, name string, extra map[string]any) olmv1.ClusterObjectSetObject {
	m := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}
	if ns != "" {
		m["metadata"].(map[string]any)["namespace"] = ns
	}
	for k, v := range extra {
		m[k] = v
	}
	return olmv1.ClusterObjectSetObject{Object: unstructured.Unstructured{Object: m}}
}

func cos(name string, rev int64, phases ...olmv1.ClusterObjectSetPhase) *olmv1.ClusterObjectSet {
	c := &olmv1.ClusterObjectSet{Spec: olmv1.ClusterObjectSetSpec{LifecycleState: olmv1.LifecycleStateActive, Revision: rev,
		CollisionProtection: olmv1.CollisionProtectionPrevent, Phases: phases}}
	c.Name = name
	return c
}

func phase(name string, objs ...olmv1.ClusterObjectSetObject) olmv1.ClusterObjectSetPhase {
	return olmv1.ClusterObjectSetPhase{Name: name, Objects: objs}
}

func TestDiff(t *testing.T) {
	cm := func(v string) olmv1.ClusterObjectSetObject {
		return obj("v1", "ConfigMap", "ns", "settings", map[string]any{"data": map[string]any{"k": v}})
	}
	crd := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com", nil)
	deploy := obj("apps/v1", "Deployment", "ns", "web", nil)
	secret := func(vals map[string]any) olmv1.ClusterObjectSetObject {
		return obj("v1", "Secret", "ns", "creds", map[string]any{"data": vals})
	}
	type row struct {
		File   string
		Status Status
	}
	tests := map[string]struct {
		a, b *olmv1.ClusterObjectSet
		opts Options
		want []row
		// contains are strings the side's files must hold, by file name.
		containsA, containsB map[string][]string
		notContains          []string
	}{
		"same objects, other names and revision": {
			a:         cos("app-1", 1, phase("crds", crd), phase("configuration", cm("1"))),
			b:         cos("app-2", 2, phase("crds", crd), phase("configuration", cm("1"))),
			want:      []row{{SpecFile, Changed}, {"ConfigMap.ns.settings.yaml", Unchanged}, {"apiextensions.k8s.io.CustomResourceDefinition.widgets.example.com.yaml", Unchanged}},
			containsA: map[string][]string{SpecFile: {"revision: 1"}, "ConfigMap.ns.settings.yaml": {"# phase 2: configuration\n", "k: \"1\""}},
			containsB: map[string][]string{SpecFile: {"revision: 2"}},
		},
		"changed, added, removed, moved between phases": {
			a:    cos("app-1", 1, phase("configuration", cm("1")), phase("deploy", deploy)),
			b:    cos("app-2", 1, phase("configuration", cm("2")), phase("crds", crd)),
			want: []row{{SpecFile, Changed}, {"ConfigMap.ns.settings.yaml", Changed}, {"apiextensions.k8s.io.CustomResourceDefinition.widgets.example.com.yaml", Added}, {"apps.Deployment.ns.web.yaml", Removed}},
		},
		"a phase move is a change": {
			a:         cos("x", 1, phase("configuration", cm("1"))),
			b:         cos("x", 1, phase("deploy", cm("1"))),
			want:      []row{{SpecFile, Changed}, {"ConfigMap.ns.settings.yaml", Changed}},
			containsB: map[string][]string{"ConfigMap.ns.settings.yaml": {"# phase 1: deploy\n"}},
		},
		"object collision protection shows": {
			a:         cos("x", 1, phase("p", cm("1"))),
			b:         cos("x", 1, phase("p", olmv1.ClusterObjectSetObject{Object: cm("1").Object, CollisionProtection: olmv1.CollisionProtectionNone})),
			want:      []row{{SpecFile, Unchanged}, {"ConfigMap.ns.settings.yaml", Changed}},
			containsB: map[string][]string{"ConfigMap.ns.settings.yaml": {"# collisionProtection: None\n"}},
		},
		"nothing on one side": {
			a:    nil,
			b:    cos("x", 1, phase("p", cm("1"))),
			want: []row{{SpecFile, Added}, {"ConfigMap.ns.settings.yaml", Added}},
		},
		"Secret values masked": {
			a:           cos("x", 1, phase("p", secret(map[string]any{"same": "c2FtZQ==", "changed": "b2xk", "gone": "Z29uZQ=="}))),
			b:           cos("x", 1, phase("p", secret(map[string]any{"same": "c2FtZQ==", "changed": "bmV3", "new": "bmV3"}))),
			want:        []row{{SpecFile, Unchanged}, {"Secret.ns.creds.yaml", Changed}},
			containsA:   map[string][]string{"Secret.ns.creds.yaml": {"same: '***'", "changed: '*** (before)'", "gone: '***'"}},
			containsB:   map[string][]string{"Secret.ns.creds.yaml": {"same: '***'", "changed: '*** (after)'", "new: '***'"}},
			notContains: []string{"c2FtZQ==", "b2xk", "bmV3", "Z29uZQ=="},
		},
		"Secret values shown when asked": {
			a:         cos("x", 1, phase("p", secret(map[string]any{"k": "b2xk"}))),
			b:         cos("x", 1, phase("p", secret(map[string]any{"k": "bmV3"}))),
			opts:      Options{ShowSecret: true},
			want:      []row{{SpecFile, Unchanged}, {"Secret.ns.creds.yaml", Changed}},
			containsA: map[string][]string{"Secret.ns.creds.yaml": {"k: b2xk"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			entries, err := Diff(tc.a, tc.b, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []row
			byFile := map[string]Entry{}
			for _, e := range entries {
				got = append(got, row{e.File, e.Status})
				byFile[e.File] = e
				for _, s := range tc.notContains {
					if strings.Contains(string(e.A)+string(e.B), s) {
						t.Errorf("%s shows %q", e.File, s)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for f, subs := range tc.containsA {
				for _, s := range subs {
					if !strings.Contains(string(byFile[f].A), s) {
						t.Errorf("A's %s lacks %q:\n%s", f, s, byFile[f].A)
					}
				}
			}
			for f, subs := range tc.containsB {
				for _, s := range subs {
					if !strings.Contains(string(byFile[f].B), s) {
						t.Errorf("B's %s lacks %q:\n%s", f, s, byFile[f].B)
					}
				}
			}
		})
	}
}

func TestDiffRefusesRefsAndDuplicates(t *testing.T) {
	withRef := cos("x", 1, phase("p", olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: "s", Key: "k"}}))
	if _, err := Diff(withRef, nil, Options{}); err == nil || !strings.Contains(err.Error(), `phase "p" object 0 is a ref`) {
		t.Errorf("a ref: %v", err)
	}
	twice := cos("x", 1, phase("p", obj("v1", "ConfigMap", "n", "a", nil)), phase("q", obj("v1", "ConfigMap", "n", "a", nil)))
	if _, err := Diff(nil, twice, Options{}); err == nil || !strings.Contains(err.Error(), "holds ConfigMap n/a twice") {
		t.Errorf("a duplicate: %v", err)
	}
}

func TestSummary(t *testing.T) {
	got := Summary([]Entry{{Status: Changed}, {Status: Added}, {Status: Unchanged}, {Status: Unchanged}})
	if got != "1 changed, 1 added, 0 removed, 2 unchanged" {
		t.Error(got)
	}
}
