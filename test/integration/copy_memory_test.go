package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupcopy"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
)

// TestCopyMemoryBounded: the manager's copy of a source object that claims a huge size (a sparse
// file of 600 GiB in a Local store: its size is all the source says of it) to a real S3 server
// (versitygw) is refused before a byte of it is read, and the manager's heap does not grow by
// more than 16 MiB meanwhile. Unbounded, the S3 client sizes its part buffer from the object's
// size (64 MiB for 600 GiB) and streams until the store or the clock gives up: with the 256 Mi
// manager, a few such tasks at once are an OOM kill, and the operator is gone for every Etcd.
func TestCopyMemoryBounded(t *testing.T) {
	srv := s3server.StartT(t, "", "target")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	root := t.TempDir()
	src, err := backupstore.NewLocal(root, "shoot/etcd-main/backups", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	huge := snapshot.Full(10, time.Now().Add(-time.Hour))
	if _, err := src.Put(ctx, huge.Key(), strings.NewReader("x"), 1, backupstore.SHA256Hex([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(root, "shoot/etcd-main/backups", "etcd", filepath.FromSlash(huge.Key())), 600<<30); err != nil {
		t.Fatal(err)
	}
	dst, err := backupstore.New(backupstore.Config{Provider: "S3", Container: "target", Prefix: "etcd", Secret: srv.SecretData()})
	if err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	res, err := backupcopy.Run(ctx, src, dst, backupcopy.Filter{Now: time.Now()}, backupcopy.Limits{}, backupstore.Backoff{Attempts: 1}, logr.Discard())
	took := time.Since(start)
	close(stop)
	<-sampled
	growth := int64(peak.Load()) - int64(before.HeapAlloc)
	t.Logf("copy of a 600 GiB source object: %v after %s, heap growth at peak %.1f MiB, result %s", err, took.Round(time.Millisecond), float64(growth)/(1<<20), res)
	var large *backupcopy.TooLargeError
	if !errors.As(err, &large) || !backupcopy.Permanent(err) {
		t.Errorf("error %v, want a permanent TooLargeError", err)
	}
	if growth > 16<<20 {
		t.Errorf("the heap grew by %.1f MiB copying one object, want at most 16 MiB", float64(growth)/(1<<20))
	}
	if objs, err := dst.List(context.Background(), ""); err != nil || len(objs) != 0 {
		t.Errorf("the target holds %v (%v), want nothing", objs, err)
	}
}
