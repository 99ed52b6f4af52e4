// Command gen writes the etcd-backup-restore fixture chains beside it (../): one history of a
// real etcd member, backed up as etcd-backup-restore does it (a full snapshot, then deltas of
// watch events), written once per compression, plus expected.json, the member's keyspace at the
// chain's end. It imports nothing of etcd-conductor's snapshot code, so the fixtures test the
// reader against an independent writer of the format (docs/backup-format.md).
//
//	go run ./test/testdata/etcd-backup-restore/gen
//
// It needs bin/etcd-<etcdtest.DefaultVersion> (make tools).
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
)

func main() {
	root, err := etcdtest.RepoRoot()
	if err != nil {
		log.Fatal(err)
	}
	out := flag.String("out", filepath.Join(root, "test", "testdata", "etcd-backup-restore"), "the fixture directory")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := &harness{}
	code := 0
	if err := generate(ctx, h, *out); err != nil {
		log.Print(err)
		code = 1
	}
	h.cleanup()
	os.Exit(code)
}

// harness is the part of testing.TB that etcdtest needs, for a program: it logs, and on a fatal
// error stops the etcd it started before exiting.
type harness struct{ cleanups []func() }

func (h *harness) Helper()                         {}
func (h *harness) Logf(format string, args ...any) { log.Printf(format, args...) }
func (h *harness) Cleanup(f func())                { h.cleanups = append(h.cleanups, f) }

func (h *harness) Fatalf(format string, args ...any) {
	log.Printf(format, args...)
	h.cleanup()
	os.Exit(1)
}

func (h *harness) TempDir() string {
	dir, err := os.MkdirTemp("", "etcd-backup-restore-gen-*")
	if err != nil {
		h.Fatalf("temp dir: %v", err)
	}
	h.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// cleanup runs the cleanups last first, as testing does.
func (h *harness) cleanup() {
	for i := len(h.cleanups) - 1; i >= 0; i-- {
		h.cleanups[i]()
	}
	h.cleanups = nil
}
