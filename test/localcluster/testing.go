package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
)

// StartForTest starts a cluster and stops it in t.Cleanup, which also runs
// when the test fails or panics. Without the binaries it skips, except under
// CI=true or with ETCD_CONDUCTOR_BIN_DIR set, where it fails: they must have run `make tools`.
func StartForTest(t testing.TB, o Options) *Cluster {
	t.Helper()
	SkipWithoutBinaries(t, o.BinDir)
	if o.WorkDir == "" {
		o.WorkDir = t.TempDir()
	}
	c, err := Start(context.Background(), o)
	if err != nil {
		t.Fatalf("start local control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// The work dir goes with the test; keep the likeliest clue.
			t.Logf("kube-controller-manager log tail:\n%s", proc.TailFile(filepath.Join(c.paths.logs, "kube-controller-manager.log"), 4000))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop local control plane: %v", err)
		}
	})
	return c
}

// SkipWithoutBinaries skips t when the control-plane binaries are missing
// from binDir (default DefaultBinDir), or fails it when CI=true: CI must have
// run `make tools`.
func SkipWithoutBinaries(t testing.TB, binDir string) {
	t.Helper()
	requireBinaries(t, binDir, EtcdBinary, APIServerBinary, ControllerManagerBinary)
}

// RequireBinary returns the path of a tool `make tools` links into the bin
// dir (helm, kubectl, controller-gen); without it t skips, or fails under CI=true.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(requireBinaries(t, "", name), name)
}

func requireBinaries(t testing.TB, binDir string, names ...string) string {
	t.Helper()
	if binDir == "" {
		dir, err := DefaultBinDir()
		if err != nil {
			t.Fatalf("locate binaries: %v", err)
		}
		binDir = dir
	}
	var missing []string
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return binDir
	}
	// Under CI, or with the bin dir named on purpose (make exports it; so does a run of the matrix
	// or a soak by hand), a missing binary is a failure: a skip would let `go test` print ok for a
	// suite that ran nothing.
	if os.Getenv("CI") == "true" || os.Getenv(etcdtest.BinDirEnv) != "" {
		t.Fatalf("binaries %v missing in %s: run `make tools`", missing, binDir)
		return binDir
	}
	t.Skipf("binaries %v missing in %s (run `make tools`)", missing, binDir)
	return binDir
}
