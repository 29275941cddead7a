// Package e2e is the end-to-end suite of the manager as it runs in a cluster: several replicas behind
// one webhook address, with cert-manager's certificate or its own self-signed one, leader election
// and rollouts. The same cases run on kind (test/e2e/kind, `make test-e2e`, with Docker) and on the
// local control plane (test/e2e/local, `make test-e2e-local`, part of `make test`); a Cluster hides
// how replicas run there.
package e2e

import (
	"context"
	"crypto/x509"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// Cert modes of the managers (their --webhook-cert-source).
const (
	ModeCertManager = "secret"
	ModeSelfSigned  = "self-signed"
)

// Cluster is a cluster running the manager's replicas behind one webhook address.
type Cluster interface {
	// Config is an admin REST config.
	Config() *rest.Config
	// Namespace is the manager's namespace.
	Namespace() string
	// Deploy (re)installs the manager with n replicas in the given certificate mode; extra are
	// flags for every replica (e.g. lifetimes of seconds). It returns once every replica is ready.
	Deploy(ctx context.Context, mode string, replicas int, extra ...string) error
	// Switch installs mode's overlay over the running replicas as a Deployment's rolling update does
	// (one replica more, none less): a replica of mode starts, and once it is ready an old one stops,
	// until every replica is of mode. Nothing is reset. It returns once every replica is ready.
	Switch(ctx context.Context, mode string) error
	// Replicas is the number of replicas deployed.
	Replicas() int
	// Served is the certificate replica i serves now.
	Served(ctx context.Context, i int) (*x509.Certificate, error)
	// Leader is the index of the replica that holds the leader election Lease.
	Leader(ctx context.Context) (int, error)
	// Kill ends replica i at once, as a crash does; Stop ends it gracefully. Neither restarts it.
	Kill(ctx context.Context, i int) error
	Stop(ctx context.Context, i int) error
	// Restarts counts the restarts of every replica since Deploy (a crash and the like; not Kill
	// or Stop).
	Restarts(ctx context.Context) (int, error)
	// Logf reports a figure of the suite.
	Logf(format string, args ...any)
}

// Overlay is the config/ overlay that installs mode.
func Overlay(mode string) string {
	if mode == ModeSelfSigned {
		return "self-signed"
	}
	return "default"
}

// ResetCA deletes the self-signed mode's CA Secret, so that a deploy of that mode starts from "no CA
// yet"; other modes keep what they have.
func ResetCA(ctx context.Context, cl client.Client, namespace, mode string) error {
	if mode != ModeSelfSigned {
		return nil
	}
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: certs.DefaultCASecret}}
	return client.IgnoreNotFound(cl.Delete(ctx, ca))
}
