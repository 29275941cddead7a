package testenv

import (
	"path/filepath"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

// RepoPath is the path of elem inside the repository; it fails t when the repository is not found.
func RepoPath(t testing.TB, elem ...string) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// Kustomize renders the repository's config/<overlay> with the control plane's kubectl.
func Kustomize(t testing.TB, overlay string) []byte {
	t.Helper()
	out, _ := MustKubectl(t, nil, "kustomize", RepoPath(t, "config", overlay))
	return []byte(out)
}
