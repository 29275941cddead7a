// Package toolpins checks the pinned tool modules that make test builds beside the module's own
// packages: every module a tool shares with the main module is required at the main module's
// version. The Go build cache then compiles each shared package once, for both: on a fresh machine
// that is about 130 CPU seconds of Kubernetes' client libraries that helm would compile again
// (docs/benchmarks/2026-11-28-make-test-warm.md).
//
// The control plane's module (hack/tools/controlplane) is not held to it: its Kubernetes libraries
// are those of the pinned control-plane release.
package toolpins

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// tools are the tool modules held to the main module's versions.
var tools = []string{"hack/tools/helm"}

func TestToolsShareTheModulesVersions(t *testing.T) {
	main := requires(t, "go.mod")
	for _, dir := range tools {
		for path, version := range requires(t, filepath.Join(dir, "go.mod")) {
			if want, shared := main[path]; shared && version != want {
				t.Errorf("%s requires %s %s, the main module %s: in %s, run go get %s@%s && go mod tidy (or move the main module to %s)",
					dir, path, version, want, dir, path, want, version)
			}
		}
	}
}

// requires reads the module versions a go.mod (path from the repository's root) requires.
func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	name := filepath.Join("..", "..", path)
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(name, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range f.Require {
		out[r.Mod.Path] = r.Mod.Version
	}
	return out
}
