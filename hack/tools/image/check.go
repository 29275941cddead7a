package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"io"
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

// Check reads the image tagged tag back from the docker-archive at archive and checks what the
// Deployment relies on: entrypoint /manager, a numeric non-root user (runAsNonRoot needs a number),
// a static /manager that answers --version (printing version, when not empty; run only when the
// image's platform is this machine's) and that rebuilding from that binary gives the same digest.
// It returns a report of what it saw.
func Check(archive, tag, version string) (string, error) {
	t, err := name.NewTag(tag)
	if err != nil {
		return "", err
	}
	img, err := tarball.ImageFromPath(archive, &t)
	if err != nil {
		return "", fmt.Errorf("%s: %w", archive, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	c := cf.Config
	var problems []string
	if !slices.Equal(c.Entrypoint, []string{entrypoint}) {
		problems = append(problems, fmt.Sprintf("entrypoint is %q, want [%q]", c.Entrypoint, entrypoint))
	}
	if uid, gid, ok := strings.Cut(c.User, ":"); !nonZeroNumber(uid) || (ok && !nonZeroNumber(gid)) {
		problems = append(problems, fmt.Sprintf("user is %q, want a numeric non-root uid[:gid]", c.User))
	}
	if cf.OS != "linux" {
		problems = append(problems, fmt.Sprintf("os is %q, want linux", cf.OS))
	}
	if v := c.Labels["org.opencontainers.image.version"]; version != "" && v != version {
		problems = append(problems, fmt.Sprintf("version label is %q, want %q", v, version))
	}

	dir, err := os.MkdirTemp("", "image-check-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }() // a temporary folder left behind is no failure
	bin := filepath.Join(dir, "manager")
	hdr, err := extract(img, strings.TrimPrefix(entrypoint, "/"), bin)
	if err != nil {
		return "", err
	}
	if hdr.Mode&0o777 != 0o755 {
		problems = append(problems, fmt.Sprintf("/manager has mode %#o, want 0755", hdr.Mode&0o777))
	}
	if err := static(bin); err != nil {
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
		return "", err
	}
	again, err := Build(binary, Options{Version: c.Labels["org.opencontainers.image.version"], Arch: cf.Architecture, Created: cf.Created.Time})
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	if d, err := again.Digest(); err != nil || d != digest {
		problems = append(problems, fmt.Sprintf("rebuilding from the same binary gave digest %s (%v), not %s", d, err, digest))
	}

	if len(problems) > 0 {
		return "", fmt.Errorf("%s (%s): %s", archive, tag, strings.Join(problems, "; "))
	}
	desc, err := Describe(img)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(archive)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("image %s in %s (%s): ok\n"+
		"  %s\n"+
		"  %s/%s, entrypoint %q, user %s, created %s\n"+
		"  /manager: %s, mode %#o, owner %d:%d, statically linked\n"+
		"  /manager --version: %s\n"+
		"  rebuilt from the extracted binary: same digest\n",
		tag, archive, mb(fi.Size()), desc, cf.OS, cf.Architecture, c.Entrypoint, c.User,
		cf.Created.UTC().Format(time.RFC3339), mb(hdr.Size), hdr.Mode&0o7777, hdr.Uid, hdr.Gid, ran), nil
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

// static fails unless file is an ELF executable with no interpreter and no shared libraries: the image
// has no libc.
func static(file string) (err error) {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("/manager is not an ELF executable: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
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
