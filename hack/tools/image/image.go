package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// The nonroot user and group of distroless, which the Dockerfile's base image runs as.
	nonRoot    = 65532
	user       = "65532:65532"
	entrypoint = "/manager"
	source     = "https://github.com/cos-externalizer/cos-externalizer"
)

// Options are what the image records besides the binary.
type Options struct {
	Version string    // the org.opencontainers.image.version label
	Arch    string    // GOARCH of the binary
	Created time.Time // the one timestamp of the image: config, history and every file
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, or the Unix epoch: a fixed time keeps the digest a function
// of the binary alone.
func sourceDateEpoch() time.Time {
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(s, 0).UTC()
	}
	return time.Unix(0, 0).UTC()
}

// Build returns the image: empty base, one layer, and the config the Dockerfile sets.
func Build(binary []byte, o Options) (v1.Image, error) {
	files, err := layerTar(binary, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithCompressedCaching, tarball.WithCompressionLevel(gzip.DefaultCompression))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   created,
		CreatedBy: "hack/tools/image: /manager, /etc/passwd, /etc/group, /home/nonroot, /tmp",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = "linux"
	cf.Architecture = o.Arch
	cf.Config = v1.Config{
		Entrypoint: []string{entrypoint},
		User:       user,
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.source":  source,
			"org.opencontainers.image.title":   "cos-externalizer",
			"org.opencontainers.image.version": o.Version,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// layerTar is the layer's file system as an uncompressed tar, every entry stamped with the same time.
func layerTar(binary []byte, at time.Time) ([]byte, error) {
	const (
		passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
		group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	)
	entries := []struct {
		name     string
		mode     int64
		owner    int
		contents []byte
	}{
		{"etc/", 0o755, 0, nil},
		{"etc/group", 0o644, 0, []byte(group)},
		{"etc/passwd", 0o644, 0, []byte(passwd)},
		{"home/", 0o755, 0, nil},
		{"home/nonroot/", 0o700, nonRoot, nil},
		{"manager", 0o755, nonRoot, binary},
		{"tmp/", 0o1777, 0, nil},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner, ModTime: at, Format: tar.FormatPAX}
		if e.contents == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.contents))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes img as a docker-archive tarball tagged tag, replacing path whole.
func WriteArchive(path, tag string, img v1.Image) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, t, img); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// Describe names the image's digests and layer size.
func Describe(img v1.Image) (string, error) {
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	id, err := img.ConfigName()
	if err != nil {
		return "", err
	}
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	var size int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return "", err
		}
		size += n
	}
	return fmt.Sprintf("manifest digest %s, image ID %s, %d layer(s) of %s compressed", digest, id, len(layers), mb(size)), nil
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
