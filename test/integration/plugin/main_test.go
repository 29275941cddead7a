package plugin_test

import (
	"context"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

var manager *testenv.Manager

// startManager starts the manager (webhooks and reconciler) in the process; it may run again after
// a test stopped it.
func startManager(ctx context.Context) (*testenv.Manager, error) {
	return testenv.Env.StartManager(ctx)
}

func TestMain(m *testing.M) {
	testenv.RunWithManager(m, &manager, func(ctx context.Context, _ *testenv.Environment) (*testenv.Manager, error) {
		return startManager(ctx)
	})
}

// restartManagerAfter starts a manager again when the test ends, for the tests after it.
func restartManagerAfter(t *testing.T) {
	t.Cleanup(func() {
		m, err := startManager(context.Background())
		if err != nil {
			t.Errorf("starting the manager again: %v", err)
			return
		}
		manager = m
	})
}
