package plugin_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestApplyRestoresMissingSecrets: a ClusterObjectSet restored from a backup without its Secrets
// holds refs with nothing behind them; kubectl cos apply of the same manifests writes them again
// (a dry run only says so), and the next apply writes nothing.
func TestApplyRestoresMissingSecrets(t *testing.T) {
	heal := testenv.Env.CreateRestored(t, "plugin-heal")
	name := heal.Stored.Name
	file := writeFile(t, heal.Inline)

	r := mustPlugin(t, "apply", "-f", file, "--dry-run=server")
	if !strings.Contains(r.stderr, "1 Secret of the stored refs missing") || !strings.Contains(r.stderr, "nothing written") {
		t.Errorf("the dry run does not say it would write the Secret again: %s", r.stderr)
	}
	if n := len(testenv.Env.ObjectDataSecrets(t, name)); n != 0 {
		t.Fatalf("the dry run wrote %d Secrets", n)
	}

	r = mustPlugin(t, "apply", "-f", file)
	if !strings.Contains(r.stderr, "1 Secret of the stored refs missing") || !strings.Contains(r.stderr, "re-created 1") {
		t.Errorf("the apply does not say it wrote the Secret again: %s", r.stderr)
	}
	testenv.CheckPlannedSecrets(ctx, t, c(), heal.Plan)
	if got := getCOS(t, name); !cmp.Equal(got.Spec.Phases, heal.Stored.Spec.Phases) {
		t.Errorf("the stored phases changed:\n%s", cmp.Diff(heal.Stored.Spec.Phases, got.Spec.Phases))
	}

	if r := mustPlugin(t, "apply", "-f", file); !strings.Contains(r.stderr, "no Secret written") {
		t.Errorf("the next apply: %s", r.stderr)
	}
	testenv.Env.WaitOwned(t, name)
}
