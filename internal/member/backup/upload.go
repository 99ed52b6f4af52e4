package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// errUpload marks an UploadFull error that came from the store rather than from etcd; errEncode
// an UploadDelta error from the events rather than the store.
var (
	errUpload = errors.New("upload")
	errEncode = errors.New("encode")
)

// UploadFull takes a full snapshot of member (Maintenance.Snapshot), spools it to spoolDir
// compressed with c while hashing it, uploads it to store as Full-…-<rev>-<at>[suffix] and
// verifies it there. The revision is read before the snapshot starts, so it is a lower bound of
// what the snapshot holds: deltas from rev+1 on may repeat a few events the database already
// has, which replays to the same state, and never miss one.
func UploadFull(ctx context.Context, member Member, store backupstore.Store, spoolDir string, at time.Time, c snapshot.Compression) (snapshot.Snapshot, backupstore.Object, error) {
	rev, err := member.Revision(ctx)
	if err != nil {
		return snapshot.Snapshot{}, backupstore.Object{}, err
	}
	spool, size, sum, err := spoolSnapshot(ctx, member, spoolDir, c)
	if spool != "" {
		defer os.Remove(spool)
	}
	if err != nil {
		return snapshot.Snapshot{}, backupstore.Object{}, err
	}
	f, err := os.Open(spool)
	if err != nil {
		return snapshot.Snapshot{}, backupstore.Object{}, err
	}
	defer f.Close()
	snap := snapshot.Full(rev, at)
	snap.Compression = c
	obj, err := store.Put(ctx, snap.Key(), f, size, sum)
	if err != nil {
		return snapshot.Snapshot{}, backupstore.Object{}, fmt.Errorf("%w: %w", errUpload, err)
	}
	return snap, obj, nil
}

// spoolSnapshot copies the member's snapshot to a file, compressing it with c on the way; the
// size and hash are the file's, the bytes the store must end up holding.
func spoolSnapshot(ctx context.Context, member Member, dir string, c snapshot.Compression) (path string, size int64, sum string, err error) {
	rc, err := member.Snapshot(ctx)
	if err != nil {
		return "", 0, "", err
	}
	defer rc.Close()
	f, err := os.CreateTemp(dir, "full-snapshot-*")
	if err != nil {
		return "", 0, "", fmt.Errorf("spool snapshot: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	out := &countingWriter{w: io.MultiWriter(f, h)}
	zw, err := snapshot.Compress(out, c)
	if err != nil {
		return f.Name(), 0, "", fmt.Errorf("spool snapshot: %w", err)
	}
	if _, err := io.Copy(zw, rc); err != nil {
		return f.Name(), 0, "", fmt.Errorf("read snapshot stream: %w", err)
	}
	if err := zw.Close(); err != nil {
		return f.Name(), 0, "", fmt.Errorf("spool snapshot: %s: %w", c, err)
	}
	if err := f.Sync(); err != nil {
		return f.Name(), 0, "", fmt.Errorf("spool snapshot: %w", err)
	}
	return f.Name(), out.n, hex.EncodeToString(h.Sum(nil)), nil
}

// UploadDelta encodes delta f (snapshot.EncodeDeltaFile), compressed with c, and
// uploads them as Incr-<start>-<end>-<at>[suffix]. A delta is small enough to be held whole.
func UploadDelta(ctx context.Context, store backupstore.Store, f snapshot.DeltaFile, at time.Time, c snapshot.Compression) (snapshot.Snapshot, backupstore.Object, error) {
	start, end := f.StartRevision, f.EndRevision
	var buf bytes.Buffer
	zw, err := snapshot.Compress(&buf, c)
	if err != nil {
		return snapshot.Snapshot{}, backupstore.Object{}, fmt.Errorf("%w: %w", errEncode, err)
	}
	if err := snapshot.EncodeDeltaFile(zw, f); err != nil {
		return snapshot.Snapshot{}, backupstore.Object{}, fmt.Errorf("%w: %w", errEncode, err)
	}
	if err := zw.Close(); err != nil {
		return snapshot.Snapshot{}, backupstore.Object{}, fmt.Errorf("%w: delta %d..%d: %s: %w", errEncode, start, end, c, err)
	}
	snap := snapshot.Delta(start, end, at)
	snap.Compression = c
	obj, err := store.Put(ctx, snap.Key(), bytes.NewReader(buf.Bytes()), int64(buf.Len()), backupstore.SHA256Hex(buf.Bytes()))
	if err != nil {
		return snapshot.Snapshot{}, backupstore.Object{}, err
	}
	return snap, obj, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
