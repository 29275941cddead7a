package testenv

import (
	"slices"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
)

// Warnings collects the API server's warnings of a client's requests (rest.WarningHandler).
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// HandleWarningHeader records a warning.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// List returns the warnings collected so far.
func (w *Warnings) List() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.list)
}

// WarningClient returns a client (no cache) whose requests' warnings are collected in the Warnings
// returned.
func (e *Environment) WarningClient(t testing.TB) (client.Client, *Warnings) {
	t.Helper()
	seen := &Warnings{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = seen
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c, seen
}
