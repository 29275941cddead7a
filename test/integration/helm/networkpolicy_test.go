package helm_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestWebhookIngressCIDRs: the chart's networkPolicy.webhookIngressCIDRs renders what the kustomize
// component config/networkpolicy/control-plane-cidrs renders over each overlay (with its placeholder
// range), and the schema refuses what is not a CIDR.
func TestWebhookIngressCIDRs(t *testing.T) {
	for overlay, m := range modes {
		t.Run(overlay, func(t *testing.T) {
			want := kustomizeWithComponent(t, testenv.RepoPath(t, "config", overlay), testenv.RepoPath(t, "config", "networkpolicy", "control-plane-cidrs"))
			if np := find(want, "NetworkPolicy", "cos-externalizer-webhook"); np == nil || !strings.Contains(mustJSON(t, np.Object), `"ipBlock":{"cidr":"192.0.2.0/24"}`) {
				t.Fatalf("the component did not restrict the webhook policy: %v", np)
			}
			compare(t, helmTemplate(t, append(slices.Concat(overlayValues, m.set), "networkPolicy.webhookIngressCIDRs={192.0.2.0/24}")...), want)
		})
	}
	t.Run("schema", func(t *testing.T) {
		for _, set := range []string{"networkPolicy.webhookIngressCIDRs={anywhere}", "networkPolicy.webhookIngressCIDRs={10.0.0.1}", "networkPolicy.other=1"} {
			if out, err := helm(t, "template", release, chartDir(t), "-n", namespace, "--set", set); err == nil {
				t.Errorf("--set %s: rendered, want refused by the schema", set)
			} else if !strings.Contains(out, "schema") {
				t.Errorf("--set %s: %v, want a schema error:\n%s", set, err, out)
			}
		}
	})
}

func mustJSON(t *testing.T, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
