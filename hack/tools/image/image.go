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
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// The nonroot user and group of distroless, which the image runs as.
	nonRoot    = 65532
	user       = "65532:65532"
	entrypoint = "/manager"
	source     = "https://github.com/cos-externalizer/cos-externalizer"
	title      = "cos-externalizer"
	licenses   = "Apache-2.0"
	pathEnv    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Options are what the image records besides the binary.
type Options struct {
	Version  string    // org.opencontainers.image.version
	Revision string    // org.opencontainers.image.revision: the git commit (may be empty)
	Arch     string    // GOARCH of the binary
	Created  time.Time // the one timestamp of the image: config, history, every file and the created label
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, or the Unix epoch: a fixed time keeps the digest a function
// of the binary and the options alone.
func sourceDateEpoch() time.Time {
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(s, 0).UTC()
	}
	return time.Unix(0, 0).UTC()
}

// Labels are the OCI labels of the image config, also set as annotations on its manifest and on the
// index (https://github.com/opencontainers/image-spec/blob/main/annotations.md).
func Labels(o Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.description": "Externalizes ClusterObjectSets' inline objects into object-data Secrets and rolls them out",
		"org.opencontainers.image.licenses":    licenses,
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.version":     o.Version,
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

// Build returns the image for one platform: empty base, one layer, OCI media types, and the config
// and labels the Dockerfile sets.
func Build(binary []byte, o Options) (v1.Image, error) {
	files, err := layerTar(binary, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithCompressedCaching, tarball.WithCompressionLevel(gzip.DefaultCompression), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
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
		Env:        []string{pathEnv},
		Labels:     Labels(o),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, Labels(o)).(v1.Image), nil
}

// entry is one file or directory of the image's file system.
type entry struct {
	name     string // without the leading slash; directories end in /
	mode     int64
	owner    int // uid and gid
	contents []byte
}

// rootfs is the image's whole file system: the static binary at /manager plus the files of
// distroless/static:nonroot that the manager uses (its user and group, its home, /tmp). No CA
// certificates and no tzdata: the manager talks only to the API server, with the cluster's CA from
// its ServiceAccount, and logs in UTC. The Dockerfile copies the same entries (image rootfs).
func rootfs(binary []byte) []entry {
	const (
		passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
		group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	)
	return []entry{
		{"etc/", 0o755, 0, nil},
		{"etc/group", 0o644, 0, []byte(group)},
		{"etc/passwd", 0o644, 0, []byte(passwd)},
		{"home/", 0o755, 0, nil},
		{"home/nonroot/", 0o700, nonRoot, nil},
		{"manager", 0o755, nonRoot, binary},
		{"tmp/", 0o1777, 0, nil},
	}
}

// layerTar is the layer's file system as an uncompressed tar, every entry stamped with the same time.
func layerTar(binary []byte, at time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range rootfs(binary) {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner, ModTime: at, Format: tar.FormatPAX}
		if strings.HasSuffix(e.name, "/") {
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

// WriteRootfs writes the image's file system into dir (which must not exist yet), with the image's
// modes, owners (when run as root) and time: what the Dockerfile copies onto scratch.
func WriteRootfs(dir string, binary []byte, at time.Time) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	entries := rootfs(binary)
	asRoot := os.Geteuid() == 0
	for _, e := range entries {
		p := filepath.Join(dir, filepath.FromSlash(e.name))
		var err error
		if strings.HasSuffix(e.name, "/") {
			err = os.Mkdir(p, 0o700)
		} else {
			err = os.WriteFile(p, e.contents, 0o600)
		}
		if err == nil {
			err = os.Chmod(p, os.FileMode(e.mode&0o777)|modeBits(e.mode))
		}
		if err == nil && asRoot {
			err = os.Lchown(p, e.owner, e.owner)
		}
		if err != nil {
			return err
		}
	}
	// Times last, deepest first: creating a file changes its folder's time.
	for i := len(entries) - 1; i >= 0; i-- {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(entries[i].name)), at, at); err != nil {
			return err
		}
	}
	return nil
}

func modeBits(m int64) os.FileMode {
	var fm os.FileMode
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
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
