package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type binaries struct {
	etcd, apiserver, controllerManager, scheduler, kwok, kubectl string
	kwokStages                                                   string
}

// BinDirs returns the folders searched for binaries, in order: KUBEBUILDER_ASSETS, COS_BIN_DIR (set
// by the Makefile), and the repository's bin/.
func BinDirs() []string {
	var dirs []string
	for _, env := range []string{"KUBEBUILDER_ASSETS", "COS_BIN_DIR"} {
		if d := os.Getenv(env); d != "" {
			dirs = append(dirs, d)
		}
	}
	if root, err := RepoRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, "bin"))
	}
	return dirs
}

// Binary returns the path of a control-plane binary (e.g. "kubectl", "cert-manager-controller"), or an
// error that says how to build it.
func Binary(name string) (string, error) {
	dirs := BinDirs()
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	target := "control-plane"
	if strings.HasPrefix(name, "cert-manager-") {
		target = "certmanager"
	}
	return "", fmt.Errorf("%s not found in %s: run `make %s` to build it from the Go module proxy",
		name, strings.Join(dirs, ", "), target)
}

func findBinaries() (binaries, error) {
	var b binaries
	var errs []error
	for name, dst := range map[string]*string{
		"etcd": &b.etcd, "kube-apiserver": &b.apiserver, "kube-controller-manager": &b.controllerManager,
		"kube-scheduler": &b.scheduler, "kwok": &b.kwok, "kubectl": &b.kubectl, "kwok-stages.yaml": &b.kwokStages,
	} {
		p, err := Binary(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*dst = p
	}
	return b, errors.Join(errs...)
}

// repoPath is the path of elem inside the repository (RepoRoot).
func repoPath(elem ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{root}, elem...)...), nil
}

// RepoRoot returns the directory of this repository's go.mod, searched upwards from the working
// directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/cos-externalizer/cos-externalizer\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the cos-externalizer repository")
		}
		dir = parent
	}
}
