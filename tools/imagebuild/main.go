// Command imagebuild writes the operator's container image as an OCI archive without a Docker
// daemon and without pulling a base image (`make image`): the image is built FROM scratch out of
// the static binaries `make image` cross-compiled, a nonroot user's /etc/passwd and /etc/group,
// and an empty /tmp. The archive holds an OCI image layout (oci-layout, index.json, blobs/) with
// a multi-platform image index, plus a docker-style manifest.json for the host platform, so
// `docker load` (old and new), `kind load image-archive` and `ctr import` all accept it.
//
// Every timestamp is -created (the commit time), every owner fixed and every list sorted: the
// same binaries give the same bytes, hence the same digests, on any machine.
//
//	go run ./tools/imagebuild -out bin/etcd-conductor-image.tar \
//	  -binary linux/amd64=bin/image/linux-amd64/etcd-conductor \
//	  -binary linux/arm64=bin/image/linux-arm64/etcd-conductor \
//	  -version 0.1.0 -revision $(git rev-parse HEAD) -created $(git log -1 --format=%ct)
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

// binaryFlags collects repeated -binary os/arch=path flags.
type binaryFlags []platformBinary

func (b *binaryFlags) String() string { return fmt.Sprint(*b) }

func (b *binaryFlags) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	osName, arch, ok := strings.Cut(platform, "/")
	if !ok || osName == "" || arch == "" {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	*b = append(*b, platformBinary{OS: osName, Arch: arch, Path: path})
	return nil
}

func run(args []string) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	var spec Spec
	var binaries binaryFlags
	var created int64
	out := fs.String("out", "", "the OCI archive to write")
	fs.Var(&binaries, "binary", "os/arch=path of the static binary for that platform (repeat per platform)")
	fs.StringVar(&spec.Name, "name", "ghcr.io/etcd-conductor/etcd-conductor", "the image's repository, for the loaded image's name")
	fs.StringVar(&spec.Version, "version", "", "the release (internal/version.Version): the tag and org.opencontainers.image.version")
	fs.StringVar(&spec.Revision, "revision", "", "the commit: org.opencontainers.image.revision")
	fs.StringVar(&spec.Source, "source", "https://github.com/etcd-conductor/etcd-conductor", "org.opencontainers.image.source")
	fs.Int64Var(&created, "created", 0, "Unix time of every timestamp in the image (the commit time keeps rebuilds identical)")
	hostPlatform := fs.String("docker-platform", runtime.GOOS+"/"+runtime.GOARCH, "os/arch of the image manifest.json names, for docker load without OCI support")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || len(binaries) == 0 || spec.Version == "" {
		return fmt.Errorf("-out, -version and at least one -binary are required")
	}
	spec.Binaries = binaries
	spec.Created = created
	spec.DockerPlatform = *hostPlatform
	archive, err := Build(spec)
	if err != nil {
		return err
	}
	return archive.WriteFile(*out)
}
