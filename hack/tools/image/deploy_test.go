package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDeployRefusesUnbuiltImages runs the repository's `make deploy` with a stub kubectl that records
// its calls: an image neither pinned by digest, nor the one `make image` built, nor said verified is
// refused before kubectl runs, with the ways to build, load or push it.
func TestDeployRefusesUnbuiltImages(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "cos-externalizer.tar")
	img, err := Build([]byte("not a binary"), Options{Version: "v0.0.0-test", Arch: "amd64", Created: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(archive, "example.com/built:dev", img); err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		args     []string
		deployed bool
		output   []string
	}{
		"never built":       {args: []string{"IMG=example.com/never:built"}, output: []string{"make image IMG=example.com/never:built", "kind load image-archive", "push it to a registry", "IMG_VERIFIED=1"}},
		"the default image": {args: []string{"IMAGE_ARCHIVE=" + filepath.Join(dir, "none.tar")}, output: []string{"image cos-externalizer:dev was neither built"}},
		"another tag":       {args: []string{"IMG=example.com/built:other"}, output: []string{"was neither built"}},
		"built by make image": {args: []string{"IMG=example.com/built:dev"}, deployed: true,
			output: []string{"built by make image", "kind load image-archive"}},
		"pinned by digest": {args: []string{"IMG=example.com/x@sha256:" + strings.Repeat("0", 64)}, deployed: true, output: []string{"pinned by digest"}},
		"verified":         {args: []string{"IMG=example.com/never:built", "IMG_VERIFIED=1"}, deployed: true, output: []string{"IMG_VERIFIED=1, not checked"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls")
			stub := filepath.Join(t.TempDir(), "kubectl")
			if err := os.WriteFile(stub, []byte("#!/bin/sh\necho \"$*\" >> "+calls+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"-C", root, "--no-print-directory", "deploy", "KUBECTL=" + stub, "IMAGE_ARCHIVE=" + archive}, tc.args...)
			cmd := exec.Command(makeBin, args...)
			cmd.Env = cleanEnv()
			out, err := cmd.CombinedOutput()
			called, _ := os.ReadFile(calls)
			if (err == nil) != tc.deployed || (len(called) > 0) != tc.deployed {
				t.Errorf("make deploy: %v, kubectl called with %q; want deployed %v\n%s", err, called, tc.deployed, out)
			}
			for _, want := range tc.output {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// cleanEnv is the environment without what a calling make passes down (make test IMG=... would
// otherwise choose the image of every case).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "IMG", "IMG_VERIFIED", "IMAGE_ARCHIVE", "KUBECTL", "OVERLAY", "MAKEFLAGS", "MAKELEVEL", "MFLAGS":
		default:
			env = append(env, kv)
		}
	}
	return env
}
