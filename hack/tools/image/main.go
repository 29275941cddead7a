// Command image builds the manager's container image without Docker, and checks it. The image is
// FROM scratch, one layer holding the static binary at /manager plus /etc/passwd, /etc/group,
// /home/nonroot and /tmp (the files of distroless/static:nonroot that the manager uses), run as
// 65532:65532, with OCI labels and annotations (version, revision, licenses, source, title, created).
// The repository's Dockerfile copies the same files (image rootfs) onto scratch. Every timestamp is
// $SOURCE_DATE_EPOCH (or 0), so the same binaries always give the same digests.
//
//	image build -binary bin/image/manager -tag cos-externalizer:dev -version v1.2.3 -output bin/image/cos-externalizer.tar
//	image check -archive bin/image/cos-externalizer.tar -tag cos-externalizer:dev -version v1.2.3
//	image layout -binary amd64=m-amd64 -binary arm64=m-arm64 -version v1.2.3 -revision SHA -output dist/v1.2.3/image -sbom dist/v1.2.3/sbom.spdx.json
//	image check-layout -layout dist/v1.2.3/image -version v1.2.3 -revision SHA -sbom dist/v1.2.3/sbom.spdx.json
//	image rootfs -binary /out/manager -output /rootfs
//
// build writes a docker-archive tarball (`docker save` format) of one platform, which
// `kind load image-archive` and `docker load` accept; layout writes the release's multi-arch OCI
// image layout (an index of linux/amd64 and linux/arm64) with its SPDX SBOM as a referrer.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(os.Args[2:])
	case "check":
		err = runCheck(os.Args[2:])
	case "layout":
		err = runLayout(os.Args[2:])
	case "check-layout":
		err = runCheckLayout(os.Args[2:])
	case "rootfs":
		err = runRootfs(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: image build|check|layout|check-layout|rootfs [flags]; image build -h lists the flags")
	os.Exit(2)
}

func runBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	var o Options
	binary := fs.String("binary", "", "The static linux binary to put at /manager.")
	tag := fs.String("tag", "cos-externalizer:dev", "Tag of the image in the archive.")
	out := fs.String("output", "", "Path of the docker-archive tarball to write.")
	fs.StringVar(&o.Version, "version", "dev", "Version, for the org.opencontainers.image.version label.")
	fs.StringVar(&o.Revision, "revision", "", "Git commit, for the org.opencontainers.image.revision label.")
	fs.StringVar(&o.Arch, "arch", runtime.GOARCH, "Architecture of the binary (GOARCH).")
	_ = fs.Parse(args)
	if *binary == "" || *out == "" {
		return fmt.Errorf("build needs -binary and -output")
	}
	o.Created = sourceDateEpoch()
	bin, err := os.ReadFile(*binary)
	if err != nil {
		return err
	}
	img, err := Build(bin, o)
	if err != nil {
		return err
	}
	if err := WriteArchive(*out, *tag, img); err != nil {
		return err
	}
	s, err := Describe(img)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s, %s\n", *out, *tag, s)
	return nil
}

func runCheck(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	archive := fs.String("archive", "", "The docker-archive tarball to check.")
	tag := fs.String("tag", "cos-externalizer:dev", "Tag the archive must hold.")
	version := fs.String("version", "", "Version /manager --version must print (empty: any).")
	_ = fs.Parse(args)
	if *archive == "" {
		return fmt.Errorf("check needs -archive")
	}
	r, err := Check(*archive, *tag, *version)
	if err != nil {
		return err
	}
	fmt.Print(r)
	return nil
}

// binaryFlags collects -binary ARCH=PATH.
type binaryFlags map[string]string

func (b binaryFlags) String() string { return fmt.Sprint(map[string]string(b)) }
func (b binaryFlags) Set(s string) error {
	arch, path, ok := strings.Cut(s, "=")
	if !ok || arch == "" || path == "" {
		return fmt.Errorf("want ARCH=PATH, got %q", s)
	}
	b[arch] = path
	return nil
}

func runLayout(args []string) error {
	fs := flag.NewFlagSet("layout", flag.ExitOnError)
	var o Options
	binaries := binaryFlags{}
	fs.Var(binaries, "binary", "ARCH=PATH: the static linux binary for GOARCH ARCH (repeat for each platform).")
	out := fs.String("output", "", "Folder of the OCI image layout to write (replaced whole).")
	ref := fs.String("ref", "", "The index's name in index.json (org.opencontainers.image.ref.name); default the version.")
	sbomFile := fs.String("sbom", "", "Also write the SPDX SBOM to this file.")
	digestFile := fs.String("digest-file", "", "Also write the index digest (sha256:...) to this file.")
	repository := fs.String("repository", "ghcr.io/cos-externalizer/cos-externalizer", "The repository the image is pushed to, for the SBOM's package URL.")
	fs.StringVar(&o.Version, "version", "dev", "Version, for the org.opencontainers.image.version label.")
	fs.StringVar(&o.Revision, "revision", "", "Git commit, for the org.opencontainers.image.revision label.")
	_ = fs.Parse(args)
	if len(binaries) == 0 || *out == "" {
		return fmt.Errorf("layout needs -binary and -output")
	}
	if *ref == "" {
		*ref = o.Version
	}
	o.Created = sourceDateEpoch()
	bins := map[string][]byte{}
	for arch, path := range binaries {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		bins[arch] = b
	}
	idx, err := BuildIndex(bins, o)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	sbom, err := SBOM(bins, o, *repository, digest)
	if err != nil {
		return err
	}
	if err := WriteLayout(*out, *ref, idx, sbom); err != nil {
		return err
	}
	if *sbomFile != "" {
		if err := os.WriteFile(*sbomFile, sbom, 0o644); err != nil {
			return err
		}
	}
	if *digestFile != "" {
		if err := os.WriteFile(*digestFile, []byte(digest.String()+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %s: %s, OCI image index %s of %d platform(s), SBOM referrer\n", *out, *ref, digest, len(bins))
	return nil
}

func runCheckLayout(args []string) error {
	fs := flag.NewFlagSet("check-layout", flag.ExitOnError)
	dir := fs.String("layout", "", "The OCI image layout to check.")
	ref := fs.String("ref", "", "The index's name in index.json; default the version.")
	version := fs.String("version", "", "The version the labels and /manager --version must show.")
	revision := fs.String("revision", "", "The revision label the images must carry (empty: any).")
	sbomFile := fs.String("sbom", "", "A file that must equal the layout's SBOM (empty: none).")
	arches := fs.String("arches", "amd64,arm64", "The linux GOARCHes the index must hold, in order.")
	_ = fs.Parse(args)
	if *dir == "" || *version == "" {
		return fmt.Errorf("check-layout needs -layout and -version")
	}
	if *ref == "" {
		*ref = *version
	}
	as := strings.Split(*arches, ",")
	slices.Sort(as)
	r, err := CheckLayout(*dir, *ref, *version, *revision, *sbomFile, as)
	if err != nil {
		return err
	}
	fmt.Print(r)
	return nil
}

func runRootfs(args []string) error {
	fs := flag.NewFlagSet("rootfs", flag.ExitOnError)
	binary := fs.String("binary", "", "The static linux binary to put at /manager.")
	out := fs.String("output", "", "Folder to write the image's file system into (must not exist).")
	_ = fs.Parse(args)
	if *binary == "" || *out == "" {
		return fmt.Errorf("rootfs needs -binary and -output")
	}
	bin, err := os.ReadFile(*binary)
	if err != nil {
		return err
	}
	return WriteRootfs(*out, bin, sourceDateEpoch())
}
