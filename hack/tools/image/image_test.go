package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A tiny static stand-in for the manager: builds, archives and checks in a couple of seconds.
const fakeManager = `package main

import ("fmt"; "os")

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("cos-externalizer v0.0.0-test")
		return
	}
	os.Exit(3)
}
`

func TestBuildIsDeterministicAndChecks(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the stand-in binary")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(fakeManager), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "build", "-trimpath", "-buildvcs=false", "-o", "manager", "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "manager"))
	if err != nil {
		t.Fatal(err)
	}

	o := Options{Version: "v0.0.0-test", Arch: runtime.GOARCH, Created: time.Unix(0, 0).UTC()}
	a, err := Build(bin, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(bin, o)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("two builds of one binary: digests %s and %s", da, db)
	}

	archive := filepath.Join(dir, "image.tar")
	if err := WriteArchive(archive, "example.com/cos-externalizer:test", a); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "linux" {
		t.Skip("the check runs the linux binary")
	}
	report, err := Check(archive, "example.com/cos-externalizer:test", "v0.0.0-test")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(report, da.String()) || !strings.Contains(report, "cos-externalizer v0.0.0-test") {
		t.Errorf("report lacks the digest or the version:\n%s", report)
	}
	t.Log(report)

	if _, err := Check(archive, "example.com/cos-externalizer:test", "v9"); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("a wrong version passed the check: %v", err)
	}
	if _, err := Check(archive, "example.com/cos-externalizer:other", ""); err == nil {
		t.Error("a missing tag passed the check")
	}
}
