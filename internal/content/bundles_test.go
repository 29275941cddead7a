package content

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// TestBundles packs the real bundles: every object must resolve to itself, every Secret stay within
// the budget, and the prometheus-operator CRDs (2.8 MB inline) be stored in at most 15% of that, the
// ClusterObjectSet of refs included.
func TestBundles(t *testing.T) {
	tests := map[string]struct {
		bundle, namespace string
		opts              Options
		maxStoredPercent  float64 // 0: not checked
		wantSecrets       int
	}{
		"prometheus, default":           {"prometheus-operator-crds", "", Options{}, 15, 1},
		"prometheus, small Secrets":     {"prometheus-operator-crds", "", Options{Budget: 100 << 10}, 15, 4},
		"prometheus, compression off":   {"prometheus-operator-crds", "", Options{CompressAbove: -1}, 0, 4},
		"prometheus, forced only (96K)": {"prometheus-operator-crds", "", Options{Budget: 96 << 10, CompressAbove: -1}, 0, 7},
		"argocd, default":               {"argocd-install", "argocd", Options{}, 15, 1},
		"argocd, compression off":       {"argocd-install", "argocd", Options{CompressAbove: -1}, 0, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := loadBundle(t, tc.bundle, tc.namespace)
			p, err := PlanFor("bundle", b.in, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			budget := tc.opts.Budget
			if budget == 0 {
				budget = DefaultBudget
			}
			layout(t, b.in, p, budget)
			if p.Stats.InlineBytes != b.inline || p.Stats.Objects != len(b.objects) || p.Stats.Secrets != len(p.Secrets) {
				t.Errorf("stats %+v: want %d objects, %d inline bytes, %d Secrets", p.Stats, len(b.objects), b.inline, len(p.Secrets))
			}
			if len(p.Secrets) != tc.wantSecrets {
				t.Errorf("%d Secrets, want %d", len(p.Secrets), tc.wantSecrets)
			}
			stored := storedSize(t, p)
			percent := 100 * float64(stored) / float64(b.inline)
			t.Logf("%d objects, %d inline bytes -> %d Secrets, %d entries (%d gzip), %d value bytes, %d stored with keys and COS (%.2f%%)",
				p.Stats.Objects, b.inline, p.Stats.Secrets, p.Stats.Entries, p.Stats.Compressed, p.Stats.StoredBytes, stored, percent)
			if tc.maxStoredPercent > 0 && percent > tc.maxStoredPercent {
				t.Errorf("stored %d bytes, %.2f%% of %d inline: over %.0f%%", stored, percent, b.inline, tc.maxStoredPercent)
			}
		})
	}
}

// TestBundleTooLarge checks the error for a real object that fits no Secret, even compressed.
func TestBundleTooLarge(t *testing.T) {
	b := loadBundle(t, "prometheus-operator-crds", "")
	_, err := PlanFor("bundle", b.in, Options{Budget: 64 << 10})
	var got *TooLargeError
	if !errors.As(err, &got) {
		t.Fatalf("error %v, want a *TooLargeError", err)
	}
	want := TooLargeError{Phase: "crds", Index: 4, Kind: "CustomResourceDefinition", Name: "prometheusagents.monitoring.coreos.com",
		Size: 412580, CompressedSize: 78894, Budget: 64 << 10}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

// storedSize is what a plan puts into etcd, about: Secret data (keys and values) plus the spec of the
// ClusterObjectSet of refs as JSON. Secret and COS metadata are left out.
func storedSize(t *testing.T, p *Plan) int {
	t.Helper()
	spec := olmv1.ClusterObjectSetSpec{}
	for i, refs := range p.Refs {
		ph := olmv1.ClusterObjectSetPhase{Name: "phase-name-" + string(rune('a'+i))}
		for _, r := range refs {
			ph.Objects = append(ph.Objects, olmv1.ClusterObjectSetObject{
				Ref: olmv1.ObjectSourceRef{Name: r.SecretName, Namespace: olmv1.DefaultSystemNamespace, Key: r.Key},
			})
		}
		spec.Phases = append(spec.Phases, ph)
	}
	cos, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	n := len(cos)
	for _, s := range p.Secrets {
		for k, v := range s.Data {
			n += len(k) + len(v)
		}
	}
	return n
}
