package local

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/e2e"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// cluster is the suite's cluster, set up once for the package.
var cluster *Cluster

func TestMain(m *testing.M) {
	testenv.RunWith(m, func(ctx context.Context, env *testenv.Environment) (func(), error) {
		dir, err := os.MkdirTemp("", "cos-e2e-")
		if err != nil {
			return nil, err
		}
		manager, err := BuildManager(dir)
		if err != nil {
			return nil, err
		}
		cm, err := env.StartCertManager(ctx)
		if err != nil {
			return nil, fmt.Errorf("starting cert-manager: %w", err)
		}
		if cluster, err = New(env.ControlPlane, manager); err != nil {
			return nil, err
		}
		return func() {
			if err := cluster.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping the replicas:", err)
			}
			_ = cm.Stop()
			_ = os.RemoveAll(dir)
		}, nil
	})
}

// TestE2E runs the shared suite, one subtest per case.
func TestE2E(t *testing.T) {
	for _, name := range e2e.Order {
		t.Run(name, func(t *testing.T) {
			cluster.SetLogf(t.Logf)
			e2e.Cases[name](t, cluster)
		})
	}
}
