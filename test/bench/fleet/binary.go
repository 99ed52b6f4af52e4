package fleet

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// Binary is one manager build the benchmark measures.
type Binary struct {
	// Label names it in the tables ("before", "after").
	Label string `json:"label"`
	// Ref is what was asked for: a git ref, or "" for the current tree's bin/etcd-conductor.
	Ref string `json:"ref,omitempty"`
	// Commit is the commit it was built from ("" for the current tree, which may hold
	// uncommitted changes).
	Commit string `json:"commit,omitempty"`
	Path   string `json:"path"`
}

// CurrentBinary is the binary `make build` wrote for the current tree.
func CurrentBinary(label string) (Binary, error) {
	path, err := localcluster.ProjectBinary()
	if err != nil {
		return Binary{}, err
	}
	b := Binary{Label: label, Path: path}
	if root, err := localcluster.RepoRoot(); err == nil {
		if out, err := git(root, "rev-parse", "HEAD"); err == nil {
			b.Commit = out + "+worktree"
		}
	}
	return b, nil
}

// BinaryAt builds the manager of a git ref the way `make build` does, from an exported copy of
// that commit (no checkout is touched), into a cache keyed by commit, so a second run costs
// nothing: $XDG_CACHE_HOME/etcd-conductor/fleetbench/<commit>/etcd-conductor.
func BinaryAt(label, ref string) (Binary, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return Binary{}, err
	}
	commit, err := git(root, "rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return Binary{}, fmt.Errorf("resolving %s: %w", ref, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return Binary{}, fmt.Errorf("cache dir: %w", err)
	}
	dir := filepath.Join(cache, "etcd-conductor", "fleetbench", commit)
	bin := filepath.Join(dir, "etcd-conductor")
	b := Binary{Label: label, Ref: ref, Commit: commit, Path: bin}
	if _, err := os.Stat(bin); err == nil {
		return b, nil
	}
	src, err := os.MkdirTemp("", "fleetbench-src-")
	if err != nil {
		return Binary{}, err
	}
	defer os.RemoveAll(src)
	archive := exec.Command("bash", "-o", "pipefail", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "archive", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return Binary{}, fmt.Errorf("exporting %s: %w\n%s", commit, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binary{}, err
	}
	// Built beside its final name and renamed, so an interrupted build leaves no half binary.
	tmp := bin + ".tmp"
	build := exec.Command("go", "build", "-trimpath", "-o", tmp, "./cmd/etcd-conductor")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return Binary{}, fmt.Errorf("building %s (%s): %w\n%s", ref, commit, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return Binary{}, err
	}
	return b, nil
}

func git(dir string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
