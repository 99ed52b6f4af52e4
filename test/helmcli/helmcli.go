// Package helmcli runs the helm binary the way the chart tests, the e2e stack and the demo do:
// bin/helm (built by `make tools`), with helm's config, cache and data homes in a directory the
// caller owns, so the user's helm state is neither read nor written.
package helmcli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// Binary is helm in the binary directory ($ETCD_CONDUCTOR_BIN_DIR, else <repo>/bin).
func Binary() (string, error) {
	dir, err := localcluster.DefaultBinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "helm")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("helm not found at %s (run `make tools`): %w", path, err)
	}
	return path, nil
}

// Run runs binary with args and helm's homes under home. It returns stdout and, on failure, an
// error holding the command line, stdout and stderr.
func Run(ctx context.Context, binary, home string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}
