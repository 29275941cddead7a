package content

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// bundleCase is a bundle packed with some options, and what the plan must be like.
type bundleCase struct {
	bundle, namespace string
	opts              Options
	maxStoredPercent  float64 // 0: not checked
	wantSecrets       int
}

// checkPacking plans b with the case's options: every object must resolve to itself, every Secret stay
// within the budget, the stats add up, and the stored size (the ClusterObjectSet of refs included)
// stay within the case's percentage of the inline size.
func checkPacking(tb testing.TB, b *bundleInput, tc bundleCase) {
	tb.Helper()
	p, err := PlanFor("bundle", b.in, tc.opts)
	if err != nil {
		tb.Fatal(err)
	}
	budget := tc.opts.Budget
	if budget == 0 {
		budget = DefaultBudget
	}
	layout(tb, b.in, p, budget)
	if p.Stats.InlineBytes != b.inline || p.Stats.Objects != len(b.objects) || p.Stats.Secrets != len(p.Secrets) {
		tb.Errorf("stats %+v: want %d objects, %d inline bytes, %d Secrets", p.Stats, len(b.objects), b.inline, len(p.Secrets))
	}
	if len(p.Secrets) != tc.wantSecrets {
		tb.Errorf("%d Secrets, want %d", len(p.Secrets), tc.wantSecrets)
	}
	stored := storedSize(tb, p)
	percent := 100 * float64(stored) / float64(b.inline)
	tb.Logf("%d objects, %d inline bytes -> %d Secrets, %d entries (%d gzip), %d value bytes, %d stored with keys and COS (%.2f%%)",
		p.Stats.Objects, b.inline, p.Stats.Secrets, p.Stats.Entries, p.Stats.Compressed, p.Stats.StoredBytes, stored, percent)
	if tc.maxStoredPercent > 0 && percent > tc.maxStoredPercent {
		tb.Errorf("stored %d bytes, %.2f%% of %d inline: over %.0f%%", stored, percent, b.inline, tc.maxStoredPercent)
	}
}

// TestBundles packs the excerpts of the real bundles (builders.Excerpt): they compress to a fraction
// of their size (the two CRDs to under 25%; the whole bundles, in BenchmarkBundles, to under 15%),
// budgets small for the excerpts split them over several Secrets, and with compression off only an
// object that fits no Secret otherwise is compressed ("forced").
func TestBundles(t *testing.T) {
	tests := map[string]bundleCase{
		"prometheus, default":           {"prometheus-operator-crds", "", Options{}, 25, 1},
		"prometheus, small Secrets":     {"prometheus-operator-crds", "", Options{Budget: 10 << 10}, 25, 2},
		"prometheus, compression off":   {"prometheus-operator-crds", "", Options{CompressAbove: -1}, 0, 1},
		"prometheus, forced only (12K)": {"prometheus-operator-crds", "", Options{Budget: 12 << 10, CompressAbove: -1}, 0, 2},
		"argocd, default":               {"argocd-install", "argocd", Options{}, 45, 1},
		"argocd, small Secrets":         {"argocd-install", "argocd", Options{Budget: 8 << 10, CompressAbove: -1}, 0, 3},
		"argocd, compression off":       {"argocd-install", "argocd", Options{CompressAbove: -1}, 0, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkPacking(t, loadExcerpt(t, tc.bundle, tc.namespace), tc)
		})
	}
}

// BenchmarkBundles packs the real bundles as TestBundles packs their excerpts, and checks the plans
// the same way: the prometheus-operator CRDs (2.8 MB inline) must be stored in at most 15% of that.
func BenchmarkBundles(b *testing.B) {
	tests := map[string]bundleCase{
		"prometheus, default":           {"prometheus-operator-crds", "", Options{}, 15, 1},
		"prometheus, small Secrets":     {"prometheus-operator-crds", "", Options{Budget: 100 << 10}, 15, 4},
		"prometheus, compression off":   {"prometheus-operator-crds", "", Options{CompressAbove: -1}, 0, 4},
		"prometheus, forced only (96K)": {"prometheus-operator-crds", "", Options{Budget: 96 << 10, CompressAbove: -1}, 0, 7},
		"argocd, default":               {"argocd-install", "argocd", Options{}, 15, 1},
		"argocd, compression off":       {"argocd-install", "argocd", Options{CompressAbove: -1}, 0, 1},
	}
	for name, tc := range tests {
		b.Run(name, func(b *testing.B) {
			in := loadBundle(b, tc.bundle, tc.namespace)
			for b.Loop() {
				checkPacking(b, in, tc)
			}
		})
	}
}

// TestBundleTooLarge checks the error for a real object that fits no Secret, even compressed.
func TestBundleTooLarge(t *testing.T) {
	b := loadExcerpt(t, "prometheus-operator-crds", "")
	_, err := PlanFor("bundle", b.in, Options{Budget: 4 << 10})
	var got *TooLargeError
	if !errors.As(err, &got) {
		t.Fatalf("error %v, want a *TooLargeError", err)
	}
	want := TooLargeError{Phase: "crds", Index: 0, Kind: "CustomResourceDefinition", Name: "podmonitors.monitoring.coreos.com",
		Size: 41742, CompressedSize: 8284, Budget: 4 << 10}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

// storedSize is what a plan puts into etcd, about: Secret data (keys and values) plus the spec of the
// ClusterObjectSet of refs as JSON. Secret and COS metadata are left out.
func storedSize(t testing.TB, p *Plan) int {
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
