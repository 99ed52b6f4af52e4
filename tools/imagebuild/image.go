package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's contract with the chart and the member pods: the binary's path (the entrypoint, so
// pods set only args) and the user it runs as. The Dockerfile states the same (a test holds them
// together).
const (
	BinaryPath = "/etcd-conductor"
	NonrootUID = 65532
	User       = "65532:65532"
)

// platformBinary is one platform's static binary.
type platformBinary struct {
	OS, Arch string
	Path     string
}

// Spec is what the image is made of.
type Spec struct {
	Name     string // repository, e.g. ghcr.io/etcd-conductor/etcd-conductor
	Version  string // the tag and org.opencontainers.image.version
	Revision string
	Source   string
	Created  int64 // Unix seconds of every timestamp
	Binaries []platformBinary
	// DockerPlatform ("linux/amd64") is the image manifest.json names.
	DockerPlatform string
}

// Reference is the name the image loads as.
func (s Spec) Reference() string { return s.Name + ":" + s.Version }

func (s Spec) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "etcd-conductor",
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.revision": s.Revision,
		"org.opencontainers.image.source":   s.Source,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// Build assembles the multi-platform image index and everything the archive holds.
func Build(s Spec) (*Archive, error) {
	created := time.Unix(s.Created, 0).UTC()
	// The same base layer for every platform: one blob in the archive.
	base, err := layerOf(baseFiles(), created)
	if err != nil {
		return nil, fmt.Errorf("building the base layer: %w", err)
	}
	a := &Archive{blobs: map[v1.Hash][]byte{}}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var dockerImage v1.Image
	for _, b := range s.Binaries {
		img, err := platformImage(s, b, base, created)
		if err != nil {
			return nil, fmt.Errorf("image for %s/%s: %w", b.OS, b.Arch, err)
		}
		if err := a.addImage(img); err != nil {
			return nil, fmt.Errorf("image for %s/%s: %w", b.OS, b.Arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: b.OS, Architecture: b.Arch}},
		})
		if b.OS+"/"+b.Arch == s.DockerPlatform {
			dockerImage = img
		}
	}
	if dockerImage == nil {
		return nil, fmt.Errorf("no -binary for %s, the platform manifest.json names", s.DockerPlatform)
	}
	if err := a.addIndex(idx, s); err != nil {
		return nil, err
	}
	if err := a.addDockerManifest(dockerImage, s.Reference()); err != nil {
		return nil, err
	}
	return a, nil
}

// platformImage is one platform's image: the base layer, the binary's layer, and a config that
// runs the binary as the nonroot user.
func platformImage(s Spec, b platformBinary, base v1.Layer, created time.Time) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	binLayer, err := layerOf([]file{{name: BinaryPath[1:], mode: 0o755, data: bin}}, created)
	if err != nil {
		return nil, fmt.Errorf("building the binary's layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		OS:           b.OS,
		Architecture: b.Arch,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{BinaryPath},
			// No shell, no tools: PATH only for a runtime that wants one.
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			WorkingDir: "/",
			Labels:     s.labels(),
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "imagebuild: /etc/passwd, /etc/group (nonroot 65532), /tmp", Comment: "FROM scratch"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "imagebuild: " + BinaryPath}},
	)
}

// file is one entry of a layer; a name ending in "/" is a directory.
type file struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte
}

// baseFiles are what a scratch image lacks for a nonroot process: a user and group database (so
// `id`, Go's os/user and log lines name the user, and runAsNonRoot sees a numeric user), its home
// and a world-writable /tmp with the sticky bit.
func baseFiles() []file {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonrootUID, NonrootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonrootUID)
	return []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: NonrootUID, gid: NonrootUID},
		{name: "root/", mode: 0o700},
		{name: "tmp/", mode: 0o1777},
	}
}

// layerOf is a gzip-compressed OCI layer of files, in the order given, every time set to
// created.
func layerOf(files []file, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: created,
			Typeflag: tar.TypeReg, Size: int64(len(f.data)),
		}
		if f.name[len(f.name)-1] == '/' {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	// Cached: the digest and the archive read the compressed bytes, compressed once.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}
