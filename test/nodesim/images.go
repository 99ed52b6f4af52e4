package nodesim

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// imageBinaries is what "pulling" an image yields: the host binary that stands
// in for the image's entrypoint and the other executables the image ships,
// by base name (e.g. "etcdctl"), for exec probes and shell commands.
type imageBinaries struct {
	entrypoint string
	tools      map[string]string
	id         string
}

// imageResolver maps image references to host binaries.
type imageResolver struct {
	binDir string
	// extra maps an image reference, or a repository without tag (any tag),
	// to a host binary.
	extra map[string]string
}

// etcdVersion accepts "v3.6.8", "3.6.8" and the registry.k8s.io style "3.6.8-0".
var etcdVersion = regexp.MustCompile(`^v?(\d+\.\d+\.\d+)(-\d+)?$`)

// resolve returns the binaries for image or an error worded like a failed pull.
func (r imageResolver) resolve(image string) (imageBinaries, error) {
	repo, tag := splitImage(image)
	id := fmt.Sprintf("nodesim://%s@sha256:%x", repo, sha256.Sum256([]byte(image)))
	for _, key := range []string{image, repo} {
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
	if tool, ok := b.tools[path.Base(name)]; ok {
		return tool
	}
	if shells[path.Base(name)] {
		return "/bin/" + path.Base(name)
	}
	return name
}
