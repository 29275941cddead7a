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
	// The manager is built while the control plane and cert-manager start: the build is mostly
	// compiler and linker work, their start mostly waiting.
	type build struct {
		dir, manager string
		err          error
	}
	built := make(chan build, 1)
	go func() {
		dir, err := os.MkdirTemp("", "cos-e2e-")
		if err != nil {
			built <- build{err: err}
			return
		}
		manager, err := BuildManager(dir)
		built <- build{dir: dir, manager: manager, err: err}
	}()
	testenv.RunWith(m, func(ctx context.Context, env *testenv.Environment) (func(), error) {
		cm, err := env.StartCertManager(ctx)
		b := <-built
		if err != nil {
			return nil, fmt.Errorf("starting cert-manager: %w", err)
		}
		if b.err != nil {
			_ = cm.Stop()
			return nil, b.err
		}
		dir := b.dir
		if cluster, err = New(env.ControlPlane, b.manager); err != nil {
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
