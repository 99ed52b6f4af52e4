package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// ProjectBinaryEnv names the etcd-conductor binary `make build` wrote. The Makefile sets it for
// every target that runs tests, the demo or the benchmark, so they use that binary as it is and
// nothing is compiled twice.
const ProjectBinaryEnv = "ETCD_CONDUCTOR_BINARY"

// ProjectBinary returns the etcd-conductor binary the harness runs (member-agent sidecars, the
// Helm-installed manager). Under make it is the one `make build` wrote; a missing one is an error
// that says so. Outside make (`go test` by hand) it runs `make build` once per process, so the
// binary is current and built with exactly the flags make uses, which keeps Go's build cache warm
// for both.
func ProjectBinary() (string, error) {
	if path := os.Getenv(ProjectBinaryEnv); path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("%s=%s: %w (run `make build`)", ProjectBinaryEnv, path, err)
		}
		return path, nil
	}
	return buildProjectBinary()
}

var buildProjectBinary = sync.OnceValues(func() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "build")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("make build (for bin/etcd-conductor): %w\n%s", err, out.Bytes())
	}
	return filepath.Join(root, "bin", "etcd-conductor"), nil
})
