package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A tiny static stand-in for the manager, in a module with one dependency (a folder, so the test
// needs no network): builds, archives and checks in a couple of seconds.
var fakeModule = map[string]string{
	"go.mod": "module example.com/fakemanager\n\ngo 1.24\n\nrequire example.com/dep v0.1.0\n\nreplace example.com/dep => ./dep\n",
	"main.go": `package main

import ("fmt"; "os"; "example.com/dep")

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("cos-externalizer " + dep.Version)
		return
	}
	os.Exit(3)
}
`,
	"dep/go.mod": "module example.com/dep\n\ngo 1.24\n",
	"dep/dep.go": "package dep\n\nconst Version = \"v0.0.0-test\"\n",
}

var (
	fakeOnce sync.Map // GOARCH -> func() ([]byte, error)
	fakeDir  string
	dirOnce  sync.Once
)

// fakeManager builds the stand-in for linux/arch once per test binary.
func fakeManager(t *testing.T, arch string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the stand-in binary")
	}
	dirOnce.Do(func() {
		fakeDir, err = os.MkdirTemp("", "image-test-")
		for name, content := range fakeModule {
			p := filepath.Join(fakeDir, name)
			if err == nil {
				err = os.MkdirAll(filepath.Dir(p), 0o755)
			}
			if err == nil {
				err = os.WriteFile(p, []byte(content), 0o644)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	build, _ := fakeOnce.LoadOrStore(arch, sync.OnceValues(func() ([]byte, error) {
		out := filepath.Join(fakeDir, "manager-"+arch)
		cmd := exec.Command(goBin, "build", "-trimpath", "-buildvcs=false", "-o", out, ".")
		cmd.Dir = fakeDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-mod=mod", "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, &buildError{err, string(b)}
		}
		return os.ReadFile(out)
	}))
	bin, err := build.(func() ([]byte, error))()
	if err != nil {
		t.Fatalf("building the stand-in for %s: %v", arch, err)
	}
	return bin
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

func TestMain(m *testing.M) {
	code := m.Run()
	if fakeDir != "" {
		_ = os.RemoveAll(fakeDir)
	}
	os.Exit(code)
}

var testOptions = Options{Version: "v0.0.0-test", Revision: "0123456789abcdef0123456789abcdef01234567", Created: time.Unix(1700000000, 0).UTC()}

func TestBuildIsDeterministicAndChecks(t *testing.T) {
	bin := fakeManager(t, runtime.GOARCH)
	o := testOptions
	o.Arch = runtime.GOARCH
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
	if mt, _ := a.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("media type %s, want an OCI manifest", mt)
	}
	m, err := a.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Labels(o), m.Annotations); diff != "" {
		t.Errorf("manifest annotations (-want +got):\n%s", diff)
	}

	dir := t.TempDir()
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
	id, _ := a.ConfigName()
	if !strings.Contains(report, id.String()) || !strings.Contains(report, "cos-externalizer v0.0.0-test") {
		t.Errorf("report lacks the image ID or the version:\n%s", report)
	}
	t.Log(report)

	if _, err := Check(archive, "example.com/cos-externalizer:test", "v9"); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("a wrong version passed the check: %v", err)
	}
	if _, err := Check(archive, "example.com/cos-externalizer:other", ""); err == nil {
		t.Error("a missing tag passed the check")
	}
}

func testBinaries(t *testing.T) map[string][]byte {
	return map[string][]byte{"amd64": fakeManager(t, "amd64"), "arm64": fakeManager(t, "arm64")}
}

// testIndex builds the index of bins with o.
func testIndex(t *testing.T, bins map[string][]byte, o Options) v1.ImageIndex {
	t.Helper()
	idx, err := BuildIndex(bins, o)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestIndex(t *testing.T) {
	idx := testIndex(t, testBinaries(t), testOptions)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s", im.MediaType)
	}
	if diff := cmp.Diff(Labels(testOptions), im.Annotations); diff != "" {
		t.Errorf("index annotations (-want +got):\n%s", diff)
	}
	var platforms []v1.Platform
	for _, d := range im.Manifests {
		platforms = append(platforms, *d.Platform)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		o := testOptions
		o.Arch = d.Platform.Architecture
		if diff := cmp.Diff(Labels(o), cf.Config.Labels); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", d.Platform, diff)
		}
		if cf.Architecture != d.Platform.Architecture || d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: config architecture %s, media type %s", d.Platform, cf.Architecture, d.MediaType)
		}
	}
	want := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	if diff := cmp.Diff(want, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
}

// TestIndexDigest: the index digest is a function of the binaries and the options alone.
func TestIndexDigest(t *testing.T) {
	bins := testBinaries(t)
	digest := func(bins map[string][]byte, o Options) v1.Hash {
		t.Helper()
		d, err := testIndex(t, bins, o).Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := digest(bins, testOptions)
	tests := map[string]struct {
		bins map[string][]byte
		edit func(*Options)
		same bool
	}{
		"same inputs":      {bins: bins, edit: func(*Options) {}, same: true},
		"another version":  {bins: bins, edit: func(o *Options) { o.Version = "v0.0.1" }},
		"another revision": {bins: bins, edit: func(o *Options) { o.Revision = "f" + o.Revision[1:] }},
		"another time":     {bins: bins, edit: func(o *Options) { o.Created = o.Created.Add(time.Second) }},
		"one platform":     {bins: map[string][]byte{"amd64": bins["amd64"]}, edit: func(*Options) {}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := testOptions
			tc.edit(&o)
			if got := digest(tc.bins, o); (got == base) != tc.same {
				t.Errorf("digest %s, base %s: same %v, want %v", got, base, got == base, tc.same)
			}
		})
	}
}

func TestSBOM(t *testing.T) {
	bins := testBinaries(t)
	digest := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	raw, err := SBOM(bins, testOptions, "ghcr.io/cos-externalizer/cos-externalizer", digest)
	if err != nil {
		t.Fatal(err)
	}
	again, err := SBOM(bins, testOptions, "ghcr.io/cos-externalizer/cos-externalizer", digest)
	if err != nil || string(again) != string(raw) {
		t.Fatalf("a second SBOM of the same inputs differs (%v)", err)
	}
	var doc spdxDocument
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	type pkg struct{ Name, Version, PURL, Purpose, License string }
	var got []pkg
	for _, p := range doc.Packages {
		got = append(got, pkg{p.Name, p.VersionInfo, p.ExternalRefs[0].ReferenceLocator, p.PrimaryPackagePurpose, p.LicenseDeclared})
	}
	want := []pkg{
		{"cos-externalizer", "v0.0.0-test", "pkg:oci/cos-externalizer@sha256%3A" + digest.Hex +
			"?repository_url=ghcr.io%2Fcos-externalizer%2Fcos-externalizer&tag=v0.0.0-test", "CONTAINER", "Apache-2.0"},
		{"example.com/fakemanager", "v0.0.0-test", "pkg:golang/example.com/fakemanager@v0.0.0-test", "APPLICATION", "Apache-2.0"},
		{"stdlib", runtime.Version(), "pkg:golang/stdlib@" + runtime.Version(), "LIBRARY", noAssertion},
		{"example.com/dep", "v0.1.0", "pkg:golang/example.com/dep@v0.1.0", "LIBRARY", noAssertion},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("packages (-want +got):\n%s", diff)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" ||
		doc.DocumentNamespace != source+"/spdx/v0.0.0-test/"+digest.Hex {
		t.Errorf("document %q created %q namespace %q", doc.SPDXVersion, doc.CreationInfo.Created, doc.DocumentNamespace)
	}
	if len(doc.Relationships) != 4 || doc.Relationships[0].RelationshipType != "DESCRIBES" {
		t.Errorf("relationships: %+v", doc.Relationships)
	}
}

func TestLayout(t *testing.T) {
	bins := testBinaries(t)
	idx := testIndex(t, bins, testOptions)
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	sbom, err := SBOM(bins, testOptions, "example.com/cos", digest)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := WriteLayout(good, "v0.0.0-test", idx, sbom); err != nil {
		t.Fatal(err)
	}
	sbomFile := filepath.Join(dir, "sbom.spdx.json")
	if err := os.WriteFile(sbomFile, sbom, 0o644); err != nil {
		t.Fatal(err)
	}
	report, err := CheckLayout(good, "v0.0.0-test", "v0.0.0-test", testOptions.Revision, sbomFile, []string{"amd64", "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(report, digest.String()) || !strings.Contains(report, "SPDX 2.3") {
		t.Errorf("report lacks the index digest or the SBOM:\n%s", report)
	}
	t.Log(report)

	// The same inputs write the same files.
	again := filepath.Join(dir, "again")
	if err := WriteLayout(again, "v0.0.0-test", idx, sbom); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(readTree(t, good), readTree(t, again)); diff != "" {
		t.Errorf("a second layout of the same image differs (-first +second):\n%s", diff)
	}

	noSBOM := filepath.Join(dir, "nosbom")
	if err := WriteLayout(noSBOM, "v0.0.0-test", idx, nil); err != nil {
		t.Fatal(err)
	}
	otherSBOM := filepath.Join(dir, "other.spdx.json")
	if err := os.WriteFile(otherSBOM, append(sbom, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		dir, ref, version, revision, sbom string
		arches                            []string
		want                              string
	}{
		"another version":   {good, "v0.0.0-test", "v9", "", "", []string{"amd64", "arm64"}, `version is "v0.0.0-test", want "v9"`},
		"another revision":  {good, "v0.0.0-test", "v0.0.0-test", "beef", "", []string{"amd64", "arm64"}, `revision is "0123456789abcdef0123456789abcdef01234567", want "beef"`},
		"missing platform":  {good, "v0.0.0-test", "v0.0.0-test", "", "", []string{"amd64", "arm64", "s390x"}, "want [linux/amd64 linux/arm64 linux/s390x]"},
		"unknown ref":       {good, "v1", "v0.0.0-test", "", "", []string{"amd64", "arm64"}, "names no v1"},
		"no SBOM":           {noSBOM, "v0.0.0-test", "v0.0.0-test", "", "", []string{"amd64", "arm64"}, "no SBOM referrer"},
		"SBOM file differs": {good, "v0.0.0-test", "v0.0.0-test", "", otherSBOM, []string{"amd64", "arm64"}, "differs from the SBOM in the layout"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := CheckLayout(tc.dir, tc.ref, tc.version, tc.revision, tc.sbom, tc.arches)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckLayout: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestWriteRootfs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rootfs")
	at := time.Unix(1700000000, 0)
	if err := WriteRootfs(dir, []byte("binary"), at); err != nil {
		t.Fatal(err)
	}
	type file struct {
		Mode  os.FileMode
		Owner int
		Time  time.Time
	}
	got := map[string]file{}
	want := map[string]file{}
	for _, e := range rootfs([]byte("binary")) {
		name := strings.TrimSuffix(e.name, "/")
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		owner := e.owner
		if os.Geteuid() != 0 {
			owner = -1 // not root: owners are not set
		} else if st, ok := statOwner(fi); ok {
			got[name] = file{fi.Mode().Perm() | fi.Mode()&os.ModeSticky, st, fi.ModTime().UTC()}
		}
		if _, ok := got[name]; !ok {
			got[name] = file{fi.Mode().Perm() | fi.Mode()&os.ModeSticky, -1, fi.ModTime().UTC()}
		}
		want[name] = file{os.FileMode(e.mode&0o777) | modeBits(e.mode), owner, at.UTC()}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rootfs (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "manager")); err != nil || string(b) != "binary" {
		t.Errorf("/manager holds %q (%v)", b, err)
	}
}
