package etcdclient_test

import (
	"os"
	"strconv"
	"testing"
)

func hex(id uint64) string { return strconv.FormatUint(id, 16) }

// skipOrFail skips when the etcd binaries are not built, except in CI where they must be.
func skipOrFail(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("etcd binary required under CI=true: %v", err)
	}
	t.Skipf("etcd binary not built: %v", err)
}
