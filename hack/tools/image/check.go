package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Check reads the image tagged tag back from the docker-archive at archive and checks it
// (checkImage). It returns a report of what it saw.
func Check(archive, tag, version string) (string, error) {
	t, err := name.NewTag(tag)
	if err != nil {
		return "", err
	}
	img, err := tarball.ImageFromPath(archive, &t)
	if err != nil {
		return "", fmt.Errorf("%s: %w", archive, err)
	}
	report, problems, err := checkImage(img, version, "", true)
	if err != nil {
		return "", err
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("%s (%s): %s", archive, tag, strings.Join(problems, "; "))
	}
	fi, err := os.Stat(archive)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("image %s in %s (%s): ok\n%s", tag, archive, mb(fi.Size()), report), nil
}

// checkImage checks what the Deployment relies on: entrypoint /manager, a numeric non-root user
// (runAsNonRoot needs a number), a static /manager for the image's architecture that answers
// --version (printing version, when not empty; run only when the image's platform is this
// machine's), the OCI labels (version and revision, when not empty), and that rebuilding from that
// binary gives the same digest. A docker-archive (fromArchive) keeps no manifest: there the
// config's digest (the image ID) is compared and manifest annotations are not checked. It returns
// a report of what it saw and the problems found.
func checkImage(img v1.Image, version, revision string, fromArchive bool) (report string, problems []string, err error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return "", nil, err
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{entrypoint}) {
		problems = append(problems, fmt.Sprintf("entrypoint is %q, want [%q]", c.Entrypoint, entrypoint))
	}
	if uid, gid, ok := strings.Cut(c.User, ":"); !nonZeroNumber(uid) || (ok && !nonZeroNumber(gid)) {
		problems = append(problems, fmt.Sprintf("user is %q, want a numeric non-root uid[:gid]", c.User))
	}
	if cf.OS != "linux" {
		problems = append(problems, fmt.Sprintf("os is %q, want linux", cf.OS))
	}
	want := Labels(Options{Version: c.Labels["org.opencontainers.image.version"], Revision: c.Labels["org.opencontainers.image.revision"], Created: cf.Created.Time})
	if version != "" {
		want["org.opencontainers.image.version"] = version
	}
	if revision != "" {
		want["org.opencontainers.image.revision"] = revision
	}
	problems = append(problems, compareLabels("label", c.Labels, want)...)
	if !fromArchive {
		m, err := img.Manifest()
		if err != nil {
			return "", nil, err
		}
		problems = append(problems, compareLabels("manifest annotation", m.Annotations, want)...)
	}

	dir, err := os.MkdirTemp("", "image-check-")
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }() // a temporary folder left behind is no failure
	bin := filepath.Join(dir, "manager")
	hdr, err := extract(img, strings.TrimPrefix(entrypoint, "/"), bin)
	if err != nil {
		return "", nil, err
	}
	if hdr.Mode&0o777 != 0o755 {
		problems = append(problems, fmt.Sprintf("/manager has mode %#o, want 0755", hdr.Mode&0o777))
	}
	if err := static(bin, cf.Architecture); err != nil {
		problems = append(problems, err.Error())
	}

	ran := fmt.Sprintf("not run: the image is %s/%s, this machine %s/%s", cf.OS, cf.Architecture, runtime.GOOS, runtime.GOARCH)
	if cf.OS == runtime.GOOS && cf.Architecture == runtime.GOARCH {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--version")
		cmd.Dir, cmd.Env = dir, []string{} // as bare as the image: no PATH, no HOME
		out, err := cmd.CombinedOutput()
		ran = strings.TrimSpace(string(out))
		if want := "cos-externalizer " + version; err != nil || (version != "" && ran != want) {
			problems = append(problems, fmt.Sprintf("/manager --version: %v, printed %q, want %q", err, ran, want))
		}
	}

	// The same binary must give the same image: rebuild from the extracted one and compare digests.
	binary, err := os.ReadFile(bin)
	if err != nil {
		return "", nil, err
	}
	again, err := Build(binary, Options{Version: c.Labels["org.opencontainers.image.version"],
		Revision: c.Labels["org.opencontainers.image.revision"], Arch: cf.Architecture, Created: cf.Created.Time})
	if err != nil {
		return "", nil, err
	}
	digestOf := v1.Image.Digest
	if fromArchive {
		digestOf = v1.Image.ConfigName
	}
	digest, err := digestOf(img)
	if err != nil {
		return "", nil, err
	}
	if d, err := digestOf(again); err != nil || d != digest {
		problems = append(problems, fmt.Sprintf("rebuilding from the same binary gave digest %s (%v), not %s", d, err, digest))
	}
	desc, err := Describe(img)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("  %s\n"+
		"  %s/%s, entrypoint %q, user %s, created %s, labels version %s revision %q licenses %s\n"+
		"  /manager: %s, mode %#o, owner %d:%d, statically linked\n"+
		"  /manager --version: %s\n"+
		"  rebuilt from the extracted binary: same digest\n",
		desc, cf.OS, cf.Architecture, c.Entrypoint, c.User, cf.Created.UTC().Format(time.RFC3339),
		c.Labels["org.opencontainers.image.version"], c.Labels["org.opencontainers.image.revision"],
		c.Labels["org.opencontainers.image.licenses"], mb(hdr.Size), hdr.Mode&0o7777, hdr.Uid, hdr.Gid, ran), problems, nil
}

// compareLabels lists the keys of want that got lacks or holds another value for.
func compareLabels(what string, got, want map[string]string) []string {
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			problems = append(problems, fmt.Sprintf("%s %s is %q, want %q", what, k, got[k], want[k]))
		}
	}
	return problems
}

func nonZeroNumber(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0
}

// extract copies the regular file at file (a path in the image without the leading slash) out of the
// image's layers into dst, checking each layer against its diff ID on the way. The last layer with the
// file wins; whiteouts are not handled, as this image has one layer.
func extract(img v1.Image, file, dst string) (*tar.Header, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	var found *tar.Header
	for _, l := range layers {
		want, err := l.DiffID()
		if err != nil {
			return nil, err
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		tr := tar.NewReader(io.TeeReader(rc, h))
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, errors.Join(err, rc.Close())
			}
			if path.Clean(strings.TrimPrefix(hdr.Name, "./")) != file || hdr.Typeflag != tar.TypeReg {
				continue
			}
			if err := writeFile(dst, tr); err != nil {
				return nil, errors.Join(err, rc.Close())
			}
			found = hdr
		}
		_, err = io.Copy(io.Discard, tr) // the tar end padding, for the hash
		if err == nil {
			_, err = io.Copy(h, rc)
		}
		if err = errors.Join(err, rc.Close()); err != nil {
			return nil, err
		}
		if got := fmt.Sprintf("sha256:%x", h.Sum(nil)); got != want.String() {
			return nil, fmt.Errorf("a layer's content is %s, its diff ID %s", got, want)
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no /%s in the image", file)
	}
	return found, nil
}

func writeFile(dst string, r io.Reader) error {
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// elfMachines are the ELF machines of the GOARCHes an image is built for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// static fails unless file is an ELF executable for arch with no interpreter and no shared
// libraries: the image has no libc.
func static(file, arch string) (err error) {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("/manager is not an ELF executable: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if want, ok := elfMachines[arch]; !ok || f.Machine != want {
		return fmt.Errorf("/manager is built for %v, the image's architecture is %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("/manager is dynamically linked (it has an ELF interpreter)")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("/manager needs shared libraries %v", libs)
	}
	return nil
}
