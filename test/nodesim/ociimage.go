package nodesim

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// An image mapped to an OCI archive or layout (Options.OCIImages) runs as a container runtime
// runs it, unlike the host-binary images: its layers for the host platform are unpacked once
// into a root filesystem, and its config decides what runs. spec.command replaces the
// Entrypoint and spec.args the Cmd (Kubernetes' rules); the executable is looked up inside the
// unpacked root (an absolute path, or a name on the PATH), and one that is not there fails the
// container's start as runc does ("StartError", exit 128, then CrashLoopBackOff). The image's
// USER applies when the securityContext sets no runAsUser, its Env lies under the container's
// env, its WorkingDir applies when the container sets none.
//
// The process still sees the host's root filesystem plus the pod's mounts: it is started from
// the unpacked root's path, not chrooted into it (changing the root would need the
// securityContext's identity applied inside it, by a helper the image does not ship).

// ociImage is one unpacked image.
type ociImage struct {
	rootfs string
	config v1.Config
	// id is the manifest's digest, for status.containerStatuses[].imageID.
	id string
}

// ociStore unpacks each mapped archive once, on first use, under dir.
type ociStore struct {
	dir string

	mu       sync.Mutex
	unpacked map[string]*ociImage // by source path
}

func newOCIStore(dir string) *ociStore {
	return &ociStore{dir: dir, unpacked: map[string]*ociImage{}}
}

// image returns the unpacked image of source (an OCI archive or layout directory) for the host
// platform, unpacking it the first time.
func (st *ociStore) image(source string) (*ociImage, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if img, ok := st.unpacked[source]; ok {
		return img, nil
	}
	dir, err := os.MkdirTemp(st.dir, "image-")
	if err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", source, err)
	}
	// World-traversable: a container running as a non-root user execs from here.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	img, err := unpackOCI(source, dir, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("unpacking %s: %w", source, err)
	}
	st.unpacked[source] = img
	return img, nil
}

// unpackOCI unpacks the image of source for os/arch into dir/rootfs.
func unpackOCI(source, dir, osName, arch string) (*ociImage, error) {
	layoutDir := source
	if fi, err := os.Stat(source); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		layoutDir = filepath.Join(dir, "layout")
		if err := untarArchive(source, layoutDir); err != nil {
			return nil, err
		}
		defer os.RemoveAll(layoutDir)
	}
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		return nil, fmt.Errorf("reading the OCI layout: %w", err)
	}
	img, err := platformImage(idx, osName, arch)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the image config: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, err
	}
	// mutate.Extract flattens the layers as a runtime stacks them: whiteouts (.wh.name) remove
	// what lower layers put there, opaque directories hide their lower contents.
	flat := mutate.Extract(img)
	defer flat.Close()
	if err := unpackRootfs(flat, rootfs); err != nil {
		return nil, fmt.Errorf("unpacking the layers: %w", err)
	}
	return &ociImage{rootfs: rootfs, config: cfg.Config, id: "sha256:" + digest.Hex}, nil
}

// platformImage finds the image for os/arch in an index, nested indexes included (an archive's
// index.json points at the multi-platform index).
func platformImage(idx v1.ImageIndex, osName, arch string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var seen []string
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err := platformImage(child, osName, arch); err == nil {
				return img, nil
			}
		case d.MediaType.IsImage():
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			p := d.Platform
			if p == nil { // a single-platform layout: the config says
				cfg, err := img.ConfigFile()
				if err != nil {
					return nil, err
				}
				p = &v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture}
			}
			if p.OS == osName && p.Architecture == arch {
				return img, nil
			}
			seen = append(seen, p.OS+"/"+p.Architecture)
		}
	}
	return nil, fmt.Errorf("no image for %s/%s in the index (has %v)", osName, arch, seen)
}

// untarArchive writes a plain archive of regular files (an OCI archive) under dir.
func untarArchive(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", archive, err)
		}
		name, err := entryPath(h.Name)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := writeFile(p, tr, 0o644); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry %s of type %q in an OCI archive", archive, h.Name, h.Typeflag)
		}
	}
}

// entryPath is a tar entry's name made relative and clean, or an error for a name that leaves
// the directory it is unpacked into.
func entryPath(name string) (string, error) {
	clean := path.Clean("/" + name)[1:]
	if clean == "" {
		return ".", nil
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("entry %q leaves the root", name)
		}
	}
	return filepath.FromSlash(clean), nil
}

func writeFile(p string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(p, mode) // not reduced by the umask
}

// unpackRootfs writes a flattened image filesystem under root: directories, regular files,
// symlinks (kept as written: they are resolved inside root, see resolveInRoot) and hard links,
// with their modes and owners. Device nodes and FIFOs are refused (no image here has them), and
// so is an entry that would be written through a symlink, which could land outside root.
func unpackRootfs(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name, err := entryPath(h.Name)
		if err != nil {
			return err
		}
		if strings.HasPrefix(path.Base(h.Name), ".wh.") {
			return fmt.Errorf("entry %q: a whiteout left in a flattened filesystem", h.Name)
		}
		if name == "." {
			continue
		}
		p := filepath.Join(root, name)
		if err := parentsAreDirs(root, name); err != nil {
			return err
		}
		mode := os.FileMode(h.Mode).Perm() | modeBits(h.Mode)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(p, tr, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		case tar.TypeLink:
			target, err := entryPath(h.Linkname)
			if err != nil {
				return err
			}
			if err := parentsAreDirs(root, target); err != nil {
				return err
			}
			if err := os.Link(filepath.Join(root, target), p); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("entry %q of type %q: nodesim unpacks directories, files and links only", h.Name, h.Typeflag)
		}
		if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeSymlink {
			// After the chown, which clears setuid/setgid bits.
			if err := os.Chmod(p, mode); err != nil {
				return err
			}
		}
	}
}

// modeBits maps a tar mode's setuid, setgid and sticky bits to Go's.
func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// parentsAreDirs refuses to write name when one of its parents under root is not a real
// directory (a symlink could point anywhere on the host).
func parentsAreDirs(root, name string) error {
	dir := root
	parts := strings.Split(filepath.Dir(name), string(filepath.Separator))
	for _, part := range parts {
		if part == "." || part == "" {
			continue
		}
		dir = filepath.Join(dir, part)
		fi, err := os.Lstat(dir)
		if errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("entry %q: %s is not a directory", name, strings.TrimPrefix(dir, root))
		}
	}
	return nil
}

// maxSymlinks is how many links a lookup follows before giving up, as Linux does (40).
const maxSymlinks = 40

// resolveInRoot is the host path of the image path p (absolute) inside root, symlinks followed
// as if root were "/": an absolute target restarts at root, ".." stops at root.
func resolveInRoot(root, p string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(path.Clean("/"+p), "/"), "/")
	var done []string // resolved components below root
	links := 0
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		host := filepath.Join(append([]string{root}, append(done, part)...)...)
		fi, err := os.Lstat(host)
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = append(done, part)
			continue
		}
		if links++; links > maxSymlinks {
			return "", fmt.Errorf("too many levels of symbolic links")
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = nil
		}
		parts = append(strings.Split(target, "/"), parts...)
	}
	return filepath.Join(append([]string{root}, done...)...), nil
}

// startError is a container that the runtime created but could not start (runc's exec of the
// process failed): kubelet shows it as terminated with reason StartError and exit code 128.
type startError struct{ msg string }

func (e *startError) Error() string { return e.msg }

// process is what the container runs under Kubernetes' rules: command replaces the
// Entrypoint, and args the Cmd (with a command and no args, the image's Cmd is dropped). bin
// is argv[0] resolved inside the root; path is the PATH a bare name is looked up on.
func (img *ociImage) process(command, args []string, pathEnv string) (bin string, argv []string, err error) {
	var full []string
	switch {
	case len(command) > 0:
		full = append(append(full, command...), args...)
	case len(args) > 0:
		full = append(append(full, img.config.Entrypoint...), args...)
	default:
		full = append(append(full, img.config.Entrypoint...), img.config.Cmd...)
	}
	if len(full) == 0 {
		return "", nil, &startError{msg: "failed to create containerd task: no command specified"}
	}
	bin, err = img.lookPath(full[0], pathEnv)
	if err != nil {
		return "", nil, &startError{msg: "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: " + err.Error() + ": unknown"}
	}
	return bin, full[1:], nil
}

// lookPath resolves name inside the root as runc does: a name with a slash is a path (relative
// to /), a bare name is searched on PATH; the file must be a regular executable.
func (img *ociImage) lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		host, err := img.executable(name)
		if err != nil {
			return "", fmt.Errorf("exec: %q: stat %s: %w", name, name, err)
		}
		return host, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			continue
		}
		if host, err := img.executable(path.Join(dir, name)); err == nil {
			return host, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

// pathEnv is the image's PATH, or runc's default when it sets none: where an exec probe's bare
// name is looked up (the container's own env is not at hand there).
func (img *ociImage) pathEnv() string {
	for _, kv := range img.config.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return defaultPath
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func (img *ociImage) executable(p string) (string, error) {
	host, err := resolveInRoot(img.rootfs, p)
	if err != nil {
		return "", unwrapPathError(err)
	}
	fi, err := os.Stat(host)
	if err != nil {
		return "", unwrapPathError(err)
	}
	if fi.IsDir() {
		return "", errors.New("is a directory")
	}
	if fi.Mode()&0o111 == 0 {
		return "", errors.New("permission denied")
	}
	return host, nil
}

// unwrapPathError drops the host path of an *os.PathError: the message names the image's path.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// user is the image's USER as uid and gid; ok is false when it sets none. Names are looked up
// in the image's /etc/passwd and /etc/group, as runc does.
func (img *ociImage) user() (uid, gid int64, ok bool, err error) {
	u := img.config.User
	if u == "" {
		return 0, 0, false, nil
	}
	userPart, groupPart, hasGroup := strings.Cut(u, ":")
	uid, gidFromUser, err := img.lookupID("etc/passwd", userPart, true)
	if err != nil {
		return 0, 0, false, fmt.Errorf("image user %q: %w", u, err)
	}
	gid = gidFromUser
	if hasGroup {
		if gid, _, err = img.lookupID("etc/group", groupPart, false); err != nil {
			return 0, 0, false, fmt.Errorf("image user %q: %w", u, err)
		}
	}
	return uid, gid, true, nil
}

// lookupID is a numeric id, or the id of a name in the image's passwd or group file; for a
// passwd entry also its primary group (0 for a bare number, as runc gives).
func (img *ociImage) lookupID(file, name string, passwd bool) (id, group int64, err error) {
	if n, err := strconv.ParseInt(name, 10, 64); err == nil {
		return n, 0, nil
	}
	host, err := resolveInRoot(img.rootfs, file)
	if err != nil {
		return 0, 0, fmt.Errorf("no /%s to look %q up in", file, name)
	}
	data, err := os.ReadFile(host)
	if err != nil {
		return 0, 0, fmt.Errorf("no /%s to look %q up in", file, name)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 || f[0] != name {
			continue
		}
		id, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/%s: bad id for %q", file, name)
		}
		if passwd && len(f) >= 4 {
			group, _ = strconv.ParseInt(f[3], 10, 64)
		}
		return id, group, nil
	}
	return 0, 0, fmt.Errorf("%q not found in /%s", name, file)
}
