package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Archive is an OCI image layout held in memory, plus docker's manifest.json.
type Archive struct {
	blobs        map[v1.Hash][]byte
	indexJSON    []byte
	manifestJSON []byte
}

func (a *Archive) put(h v1.Hash, data []byte) { a.blobs[h] = data }

// addImage stores an image's manifest, config and layers as blobs.
func (a *Archive) addImage(img v1.Image) error {
	raw, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	h, err := img.Digest()
	if err != nil {
		return err
	}
	a.put(h, raw)
	cfg, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	ch, err := img.ConfigName()
	if err != nil {
		return err
	}
	a.put(ch, cfg)
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		lh, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("layer %s: %w", lh, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %s: %w", lh, err)
		}
		a.put(lh, data)
	}
	return nil
}

// addIndex stores the multi-platform index as a blob and writes index.json pointing at it,
// named so that each loader finds the name it looks for: containerd (`ctr import`, kind) and
// Docker's OCI loader read io.containerd.image.name, the OCI spec's ref.name is the tag.
func (a *Archive) addIndex(idx v1.ImageIndex, s Spec) error {
	raw, err := idx.RawManifest()
	if err != nil {
		return fmt.Errorf("image index: %w", err)
	}
	h, err := idx.Digest()
	if err != nil {
		return err
	}
	a.put(h, raw)
	top := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	top = mutate.AppendManifests(top, mutate.IndexAddendum{Add: idx, Descriptor: v1.Descriptor{
		Annotations: map[string]string{
			"io.containerd.image.name":          s.Reference(),
			"org.opencontainers.image.ref.name": s.Version,
		},
	}})
	if a.indexJSON, err = top.RawManifest(); err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	return nil
}

// dockerManifest is one entry of `docker save`'s manifest.json: Docker before OCI support (25)
// loads an archive only through it.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func (a *Archive) addDockerManifest(img v1.Image, ref string) error {
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	entry := dockerManifest{Config: blobPath(m.Config.Digest), RepoTags: []string{ref}}
	for _, l := range m.Layers {
		entry.Layers = append(entry.Layers, blobPath(l.Digest))
	}
	a.manifestJSON, err = json.Marshal([]dockerManifest{entry})
	return err
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// WriteFile writes the archive to path through a temporary file, so a failed build leaves no
// half-written archive for a test to load.
func (a *Archive) WriteFile(path string) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".imagebuild-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := a.write(f); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// write emits the entries in a fixed order with fixed headers: the archive's bytes depend on its
// contents only.
func (a *Archive) write(w io.Writer) error {
	tw := tar.NewWriter(w)
	entry := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := entry("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := entry("index.json", a.indexJSON); err != nil {
		return err
	}
	if err := entry("manifest.json", a.manifestJSON); err != nil {
		return err
	}
	hashes := make([]v1.Hash, 0, len(a.blobs))
	for h := range a.blobs {
		hashes = append(hashes, h)
	}
	sort.Slice(hashes, func(i, j int) bool { return hashes[i].String() < hashes[j].String() })
	for _, h := range hashes {
		if err := entry(blobPath(h), a.blobs[h]); err != nil {
			return err
		}
	}
	return tw.Close()
}
