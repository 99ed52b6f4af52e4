package nodesim

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// imageBinaries is what "pulling" an image yields: the host binary that stands
// in for the image's entrypoint and the other executables the image ships,
// by base name (e.g. "etcdctl"), for exec probes and shell commands.
type imageBinaries struct {
	entrypoint string
	tools      map[string]string
	id         string
	// oci is set for an image unpacked from an OCI archive (ociimage.go): then what runs is
	// decided by its config and found in its root filesystem, and the fields above are unused.
	oci *ociImage
}

// imageResolver maps image references to host binaries or OCI archives.
type imageResolver struct {
	binDir string
	// extra maps an image reference, or a repository without tag (any tag),
	// to a host binary.
	extra map[string]string
	// oci maps an image reference, or a repository (any tag), to an OCI archive or layout
	// directory, unpacked by store.
	oci   map[string]string
	store *ociStore
}

// etcdVersion accepts "v3.6.8", "3.6.8" and the registry.k8s.io style "3.6.8-0".
var etcdVersion = regexp.MustCompile(`^v?(\d+\.\d+\.\d+)(-\d+)?$`)

// resolve returns the binaries for image or an error worded like a failed pull.
func (r imageResolver) resolve(image string) (imageBinaries, error) {
	repo, tag := splitImage(image)
	id := fmt.Sprintf("nodesim://%s@sha256:%x", repo, sha256.Sum256([]byte(image)))
	// The exact reference first, in either map, then the repository: an OCI archive mapped to
	// one tag and host binaries to the repository's other tags can sit side by side.
	for _, key := range []string{image, repo} {
		if source, ok := r.oci[key]; ok {
			img, err := r.store.image(source)
			if err != nil {
				return imageBinaries{}, fmt.Errorf("failed to pull and unpack image %q: %w", image, err)
			}
			return imageBinaries{oci: img, id: repo + "@" + img.id}, nil
		}
		if bin, ok := r.extra[key]; ok {
			return imageBinaries{entrypoint: bin, tools: map[string]string{filepath.Base(bin): bin}, id: id}, nil
		}
	}
	switch path.Base(repo) {
	case "etcd":
		m := etcdVersion.FindStringSubmatch(tag)
		if m == nil {
			break
		}
		version := m[1]
		bin := filepath.Join(r.binDir, "etcd-"+version)
		if !isExecutable(bin) {
			break
		}
		b := imageBinaries{entrypoint: bin, tools: map[string]string{"etcd": bin}, id: id}
		for _, tool := range []string{"etcdctl", "etcdutl"} {
			if p := filepath.Join(r.binDir, tool+"-"+version); isExecutable(p) {
				b.tools[tool] = p
			}
		}
		return b, nil
	case "etcd-conductor":
		bin := filepath.Join(r.binDir, "etcd-conductor")
		if !isExecutable(bin) {
			break
		}
		return imageBinaries{entrypoint: bin, tools: map[string]string{"etcd-conductor": bin}, id: id}, nil
	}
	return imageBinaries{}, fmt.Errorf("failed to pull and unpack image %q: no binary mapped for this image in %s", image, r.binDir)
}

// splitImage splits "host:port/a/b:tag@digest" into repository and tag.
func splitImage(image string) (repo, tag string) {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[:colon], image[colon+1:]
	}
	return image, "latest"
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// shells run as they are on the host; the image's tools are put on PATH for them.
var shells = map[string]bool{"sh": true, "bash": true, "ash": true, "dash": true}

// commandBinary decides which host executable runs for a container command.
// An empty command, or one naming the image's entrypoint or any path that is
// not one of the image's tools, runs the entrypoint (command[0] is the image's
// binary path, which does not exist on this host). Shells run from the host.
func (b imageBinaries) commandBinary(command []string) (bin string, rest []string) {
	if len(command) == 0 {
		return b.entrypoint, nil
	}
	base := path.Base(command[0])
	if shells[base] {
		return "/bin/" + base, command[1:]
	}
	if tool, ok := b.tools[base]; ok {
		return tool, command[1:]
	}
	return b.entrypoint, command[1:]
}

// execBinary resolves the first word of an exec probe or `Exec` call: an image
// tool by base name, else the host path as written.
func (b imageBinaries) execBinary(name string) string {
	if b.oci != nil {
		if bin, err := b.oci.lookPath(name, b.oci.pathEnv()); err == nil {
			return bin
		}
		return filepath.Join(b.oci.rootfs, name) // absent: the exec fails as in the image
	}
	if tool, ok := b.tools[path.Base(name)]; ok {
		return tool
	}
	if shells[path.Base(name)] {
		return "/bin/" + path.Base(name)
	}
	return name
}

// binaryStage makes an image's host binaries executable by any user, as files in an image are:
// the binaries the resolver finds may sit behind directories only root can enter (bin/ links
// into the build cache under /root), and a container running as a non-root user must still
// exec them. Each image's tools are hard-linked, or copied when a link would not be
// world-executable or crosses file systems, into one world-readable directory per image, which
// also serves as the PATH entry for shell commands.
type binaryStage struct {
	dir string // created 0755 under the system temp dir, removed by Stop

	mu     sync.Mutex
	staged map[string]imageBinaries // by image ID
}

func newBinaryStage() (*binaryStage, error) {
	dir, err := os.MkdirTemp("", "nodesim-images-")
	if err != nil {
		return nil, fmt.Errorf("creating the image binaries dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the image binaries dir: %w", err)
	}
	return &binaryStage{dir: dir, staged: map[string]imageBinaries{}}, nil
}

// stage returns b with every path replaced by its staged copy.
func (st *binaryStage) stage(b imageBinaries) (imageBinaries, error) {
	if b.oci != nil {
		return b, nil // unpacked into a world-readable root already
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if s, ok := st.staged[b.id]; ok {
		return s, nil
	}
	dir := filepath.Join(st.dir, fmt.Sprintf("%x", sha256.Sum256([]byte(b.id)))[:16])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return imageBinaries{}, err
	}
	out := imageBinaries{id: b.id, tools: map[string]string{}}
	for name, src := range b.tools {
		dst := filepath.Join(dir, name)
		if err := stageFile(src, dst); err != nil {
			return imageBinaries{}, fmt.Errorf("staging %s of the image: %w", name, err)
		}
		out.tools[name] = dst
		if src == b.entrypoint {
			out.entrypoint = dst
		}
	}
	if out.entrypoint == "" {
		dst := filepath.Join(dir, filepath.Base(b.entrypoint))
		if err := stageFile(b.entrypoint, dst); err != nil {
			return imageBinaries{}, fmt.Errorf("staging the image's entrypoint: %w", err)
		}
		out.entrypoint = dst
	}
	st.staged[b.id] = out
	return out, nil
}

// stageFile links or copies src (symlinks followed) to dst with mode 0755.
func stageFile(src, dst string) error {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Link(real, tmp); err == nil {
		if fi, err := os.Stat(tmp); err == nil && fi.Mode().Perm()&0o005 == 0o005 {
			return os.Rename(tmp, dst)
		}
		_ = os.Remove(tmp)
	}
	in, err := os.Open(real)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
