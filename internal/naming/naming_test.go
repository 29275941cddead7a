package naming

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestObject(t *testing.T) {
	cases := map[string]struct {
		obj  map[string]any
		want string
	}{
		"namespaced":            {map[string]any{"kind": "Deployment", "metadata": map[string]any{"namespace": "ns", "name": "d"}}, "Deployment ns/d"},
		"cluster-scoped":        {map[string]any{"kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "a.b"}}, "CustomResourceDefinition a.b"},
		"no kind":               {map[string]any{"metadata": map[string]any{"name": "x"}}, "object x"},
		"no name":               {map[string]any{"kind": "ConfigMap"}, "ConfigMap"},
		"nothing":               {map[string]any{}, "object"},
		"fields of wrong types": {map[string]any{"kind": 3, "metadata": "m"}, "object"},
		"name of wrong type":    {map[string]any{"kind": "Secret", "metadata": map[string]any{"name": 1, "namespace": "ns"}}, "Secret"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Object(tc.obj)); diff != "" {
				t.Errorf("Object (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCount(t *testing.T) {
	cases := map[int]string{0: "0 Secrets", 1: "1 Secret", 2: "2 Secrets", 900: "900 Secrets"}
	for n, want := range cases {
		if got := Count(n, "Secret"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
