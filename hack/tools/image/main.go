// Command image builds the manager's container image without Docker, and checks it. It is the
// Docker-free twin of the repository's Dockerfile: FROM scratch, one layer holding the static binary at
// /manager plus /etc/passwd, /etc/group, /home/nonroot and /tmp (the files of distroless/static:nonroot
// that the manager uses), run as 65532:65532. The result is a docker-archive tarball (`docker save`
// format) that `kind load image-archive` and `docker load` accept. Timestamps are fixed, so the same
// binary always gives the same image digest.
//
//	image build -binary bin/image/manager -tag cos-externalizer:dev -version v1.2.3 -output bin/image/cos-externalizer.tar
//	image check -archive bin/image/cos-externalizer.tar -tag cos-externalizer:dev -version v1.2.3
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
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
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: image build|check [flags]; image build -h lists the flags")
	os.Exit(2)
}

func runBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	var o Options
	binary := fs.String("binary", "", "The static linux binary to put at /manager.")
	tag := fs.String("tag", "cos-externalizer:dev", "Tag of the image in the archive.")
	out := fs.String("output", "", "Path of the docker-archive tarball to write.")
	fs.StringVar(&o.Version, "version", "dev", "Version, for the org.opencontainers.image.version label.")
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
