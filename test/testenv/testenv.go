// Package testenv gives a test package one real control plane for all its tests: TestMain calls
// Run, tests use the package-level Env.
//
// A local control plane is started unless USE_EXISTING_CLUSTER=true, in which case the cluster of
// KUBECONFIG is used (its CRDs are installed or updated there). Interrupting the test binary stops
// the control plane; so does killing it (the components die with their parent).
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// Environment is a running control plane with clients for it.
type Environment struct {
	*controlplane.ControlPlane
	// Client is a controller-runtime client (no cache) knowing the built-in types and the COS API.
	Client client.Client
	// Clientset is the typed client-go clientset.
	Clientset kubernetes.Interface
}

// As returns a client that acts as user, a cluster admin (system:masters) who is not the manager
// and not exempt from the Secret guard.
func (e *Environment) As(user string) (client.Client, error) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// Env is the environment of the running test binary, set by Run.
var Env *Environment

// Run starts (or connects to) the control plane, installs the CRDs, runs the tests and stops the
// control plane. It does not return.
func Run(m *testing.M) {
	os.Exit(run(m, nil))
}

// Setup prepares more of the environment before the tests run (e.g. starts the manager); the
// returned cleanup runs after them.
type Setup func(ctx context.Context, env *Environment) (cleanup func(), err error)

// RunWith is Run with a setup step.
func RunWith(m *testing.M, setup Setup) {
	os.Exit(run(m, setup))
}

// RunWithManager is Run with a manager started by start before the tests, kept in *mgr, and stopped
// after them: the one in *mgr then, as tests may stop it and start another.
func RunWithManager(m *testing.M, mgr **Manager, start func(ctx context.Context, env *Environment) (*Manager, error)) {
	RunWith(m, func(ctx context.Context, env *Environment) (func(), error) {
		started, err := start(ctx, env)
		if err != nil {
			return nil, err
		}
		*mgr = started
		return func() {
			if *mgr != nil {
				_ = (*mgr).Stop()
			}
		}, nil
	})
}

func run(m *testing.M, setup Setup) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := Start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	Env = env
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sigs; ok {
			_ = env.Stop()
			os.Exit(130)
		}
	}()
	cleanup := func() {}
	if setup != nil {
		c, err := setup(ctx, env)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testenv: setup:", err)
			_ = env.Stop()
			return 1
		}
		cleanup = c
	}
	code := m.Run()
	cleanup()
	signal.Stop(sigs)
	close(sigs)
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stopping the control plane:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Start starts a control plane (or uses KUBECONFIG with USE_EXISTING_CLUSTER=true), installs the
// CRDs and makes the clients.
func Start(ctx context.Context) (*Environment, error) {
	var cp *controlplane.ControlPlane
	var err error
	if os.Getenv("USE_EXISTING_CLUSTER") == "true" && os.Getenv("KUBECONFIG") != "" {
		cp, err = controlplane.FromKubeconfig(os.Getenv("KUBECONFIG"))
	} else {
		// The CRDs before the controller-manager: its garbage collector watches ClusterObjectSets
		// from its start (newEnvironment installs them again, a no-op, for an existing cluster).
		dir, derr := controlplane.CRDDir()
		if derr != nil {
			return nil, derr
		}
		cp, err = controlplane.Start(ctx, controlplane.Options{CRDDir: dir})
	}
	if err != nil {
		return nil, err
	}
	env, err := newEnvironment(ctx, cp)
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return env, nil
}

// StartFor starts a control plane of the test's own (Start), stopped when the test ends: for tests
// and benchmarks that each need a fresh one.
func StartFor(tb testing.TB) *Environment {
	tb.Helper()
	env, err := Start(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = env.Stop() })
	return env
}

func newEnvironment(ctx context.Context, cp *controlplane.ControlPlane) (*Environment, error) {
	dir, err := controlplane.CRDDir()
	if err != nil {
		return nil, err
	}
	if _, err := controlplane.InstallCRDs(ctx, cp.Config, dir); err != nil {
		return nil, err
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	return &Environment{ControlPlane: cp, Client: c, Clientset: cs}, nil
}
