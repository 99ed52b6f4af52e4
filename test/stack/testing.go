package stack

import (
	"context"
	"os"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// StartForTest starts a stack torn down when the test ends, even when it fails. It needs root
// (network namespaces) and the binaries `make tools` builds: without them it skips, except under
// CI=true, where it fails.
func StartForTest(t testing.TB, o Options) *Stack {
	t.Helper()
	RequireEnvironment(t)
	if o.WorkDir == "" {
		o.WorkDir = t.TempDir()
	}
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatalf("starting the stack: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping the stack: %v", err)
		}
	})
	return s
}

// RequireEnvironment skips the test when the stack cannot run here (no binaries, not root),
// except under CI=true, where that is a failure.
func RequireEnvironment(t testing.TB) {
	t.Helper()
	binDir, err := localcluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	localcluster.SkipWithoutBinaries(t, binDir)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the node simulator needs root (network namespaces)")
		}
		t.Skip("the node simulator needs root (network namespaces)")
	}
}
