package webhook_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestReapplyRestoresMissingSecrets plays a ClusterObjectSet restored from a backup without its
// Secrets (stored refs, no content behind them): applying the same manifests again, inline, with
// kubectl apply (a server-side apply by another field manager would conflict on spec.phases first), is
// accepted as a no-op change of phases and writes the missing Secrets again, with exactly the
// planned content; a dry run writes nothing. Before, the update was refused (phases immutable), and
// the only way out was deleting the ClusterObjectSet, which tears its objects down.
func TestReapplyRestoresMissingSecrets(t *testing.T) {
	ctx := context.Background()
	heal := testenv.Env.CreateRestored(t, "heal-restored")
	name := heal.Stored.Name
	file := writeJSON(t, heal.Inline)

	_, stderr := mustKubectl(t, nil, "apply", "--dry-run=server", "-f", file)
	if !strings.Contains(stderr, "would re-create them") {
		t.Errorf("the dry run does not say it would re-create the Secrets: %s", stderr)
	}
	if n := len(testenv.Env.ObjectDataSecrets(t, name)); n != 0 {
		t.Fatalf("the dry run wrote %d Secrets", n)
	}

	_, stderr = mustKubectl(t, nil, "apply", "-f", file)
	if !strings.Contains(stderr, "re-created 1 Secret") {
		t.Errorf("the re-apply does not say it re-created the Secret: %s", stderr)
	}
	if got := getCOS(t, name); !cmp.Equal(got.Spec.Phases, heal.Stored.Spec.Phases) {
		t.Errorf("the stored phases changed:\n%s", cmp.Diff(heal.Stored.Spec.Phases, got.Spec.Phases))
	}
	testenv.CheckPlannedSecrets(ctx, t, testenv.Env.Client, heal.Plan)

	// A manifest with other content is still refused: phases are immutable.
	changed := heal.Inline.DeepCopy()
	changed.Spec.Phases[0].Objects[0] = builders.Inline(builders.ConfigMap("default", name+"-other", nil))
	if _, stderr, err := kubectl(t, nil, "apply", "-f", writeJSON(t, changed)); err == nil || !strings.Contains(stderr, "immutable") {
		t.Errorf("other content was not refused: %v\n%s", err, stderr)
	}
}
