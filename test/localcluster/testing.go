package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
)

// StartForTest starts a cluster and stops it in t.Cleanup, which also runs
// when the test fails or panics. Without the binaries it skips, except under
// CI=true where it fails: CI must have run `make tools`.
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
// from binDir (default DefaultBinDir), or fails it when CI=true.
func SkipWithoutBinaries(t testing.TB, binDir string) {
	t.Helper()
	if binDir == "" {
		dir, err := DefaultBinDir()
		if err != nil {
			t.Fatalf("locate binaries: %v", err)
		}
		binDir = dir
	}
	missing := MissingBinaries(binDir)
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("binaries %v missing in %s: run `make tools`", missing, binDir)
		return
	}
	t.Skipf("binaries %v missing in %s (run `make tools`)", missing, binDir)
}
