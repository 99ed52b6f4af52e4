package datadir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	etcddatadir "go.etcd.io/etcd/server/v3/storage/datadir"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
)

// lockTimeout bounds the wait for bbolt's shared lock; an etcd running on the dir holds the
// exclusive one for as long as it runs.
const lockTimeout = time.Second

// headBytes is how much of a backend file is read again to confirm bbolt's verdict on its meta
// pages: both of them for page sizes up to 32 KiB.
const headBytes = 64 << 10

// backend is a backend file opened read-only; db is nil for an empty file, which bbolt would
// initialise (a write) rather than open.
type backend struct {
	path string
	size int64
	db   *bolt.DB
}

// dbFacts is what the backend's meta bucket says.
type dbFacts struct {
	size                  int64
	consistentIndex, term uint64
	storageVersion        string
	note                  string
}

// openDB opens the backend at path read-only, holding bbolt's shared lock.
func openDB(path string) (*backend, error) {
	// Stat follows a symbolic link, as bbolt's open does.
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, corrupt(CheckDBMissing, "%s is missing", path)
	}
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is a %s, not a file", path, kind(info.Mode()))
	}
	b := &backend{path: path, size: info.Size()}
	if b.size == 0 {
		return b, nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		return nil, b.openFailed(err)
	}
	// The size that counts is the one under the lock.
	if info, err = os.Stat(path); err != nil {
		db.Close()
		return nil, err
	}
	b.db, b.size = db, info.Size()
	return b, nil
}

// openFailed sorts bbolt's refusal to open: its verdicts on the meta pages are only believed
// when the file's first pages read without an error, since bbolt reports a failed read of
// them as an invalid database too.
func (b *backend) openFailed(err error) error {
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("%s is locked by another process (an etcd still running?): %w", b.path, err)
	}
	tooSmall := strings.HasPrefix(err.Error(), "file size too small")
	if !tooSmall && !errors.Is(err, berrors.ErrInvalid) && !errors.Is(err, berrors.ErrChecksum) && !errors.Is(err, berrors.ErrVersionMismatch) {
		return fmt.Errorf("opening %s with bbolt: %w", b.path, err)
	}
	if rerr := readHead(b.path); rerr != nil {
		return fmt.Errorf("bbolt does not open %s (%v) and reading it again fails: %w", b.path, err, rerr)
	}
	if tooSmall {
		return corrupt(CheckDBInvalid, "bbolt does not open %s: %v, less than its two meta pages", b.path, err)
	}
	return corrupt(CheckDBInvalid, "bbolt does not open %s: %v", b.path, err)
}

func readHead(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, io.LimitReader(f, headBytes))
	return err
}

func (b *backend) close() {
	if b != nil && b.db != nil {
		b.db.Close()
	}
}

// read reads the consistent index, term and storage version from the meta bucket, as etcd's
// schema.UnsafeReadConsistentIndex and UnsafeReadStorageVersion do; nothing else is read.
func (b *backend) read() (f dbFacts, err error) {
	f.size = b.size
	if b.db == nil {
		f.note = fmt.Sprintf("%s is empty: etcd initialises it as a new backend", b.path)
		return f, nil
	}
	// A page beyond the file's end (or one that cannot be read) is a memory fault in the
	// mapping; with this it is a panic the deferred recover sorts.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = b.panicked(p)
		}
	}()
	err = b.db.View(func(tx *bolt.Tx) error {
		if want := tx.Size(); want > b.size {
			return corrupt(CheckDBTruncated, "%s is %d bytes but its meta page counts %d", b.path, b.size, want)
		}
		meta := tx.Bucket(schema.Meta.Name())
		if meta == nil {
			f.note = fmt.Sprintf("%s has no meta bucket: etcd takes it as a new backend (consistent index 0)", b.path)
			return nil
		}
		var err error
		if f.consistentIndex, err = uint64At(meta, schema.MetaConsistentIndexKeyName); err != nil {
			return corrupt(CheckDBUnreadable, "%s: %v", b.path, err)
		}
		if f.term, err = uint64At(meta, schema.MetaTermKeyName); err != nil {
			return corrupt(CheckDBUnreadable, "%s: %v", b.path, err)
		}
		f.storageVersion = string(meta.Get(schema.MetaStorageVersionName))
		return nil
	})
	return f, err
}

// uint64At decodes etcd's 8-byte big-endian numbers; a missing key is 0, as etcd reads it, and a
// shorter value is one etcd would panic on.
func uint64At(b *bolt.Bucket, key []byte) (uint64, error) {
	v := b.Get(key)
	if len(v) == 0 {
		return 0, nil
	}
	if len(v) < 8 {
		return 0, fmt.Errorf("meta/%s is %d bytes, etcd reads 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// panicked sorts a panic while reading the backend. A memory fault inside the file's bytes is a
// page the kernel could not read (EIO): transient. A fault outside them, or bbolt's own panic
// on a page, comes from the content.
func (b *backend) panicked(p any) error {
	if fault, ok := p.(interface{ Addr() uintptr }); ok {
		base := b.db.Info().Data
		if addr := fault.Addr(); addr >= base && addr < base+uintptr(b.size) {
			return fmt.Errorf("reading %s: memory fault at offset %d, inside the file (a failed read?): %v", b.path, addr-base, p)
		}
		return corrupt(CheckDBUnreadable, "bbolt reads outside the %d bytes of %s (a page reference beyond the file): %v", b.size, b.path, p)
	}
	return corrupt(CheckDBUnreadable, "bbolt fails reading the meta bucket of %s: %v", b.path, p)
}

// backendReachesSnapshot checks, as etcd's recoverSnapshot does, that the backend has applied
// the WAL's snapshot, or that the snapshot's database is there for etcd to recover the backend
// from; that file is then judged as the backend. It returns a note for the Report.
func backendReachesSnapshot(dir string, consistentIndex, snapshotIndex uint64) (string, error) {
	if consistentIndex >= snapshotIndex {
		return "", nil
	}
	snapDir := etcddatadir.ToSnapDir(dir)
	path, err := snap.New(zap.NewNop(), snapDir).DBFilePath(snapshotIndex)
	if errors.Is(err, snap.ErrNoDBSnapshot) {
		// DBFilePath says so when stat fails too: only a file that is not there is a verdict.
		want := filepath.Join(snapDir, fmt.Sprintf("%016x.snap.db", snapshotIndex))
		switch _, serr := os.Lstat(want); {
		case serr == nil:
			return "", fmt.Errorf("%s appeared while it was looked for", want)
		case !errors.Is(serr, fs.ErrNotExist):
			return "", fmt.Errorf("looking for %s: %w", want, serr)
		}
		return "", corrupt(CheckDBBehindSnapshot, "the backend's consistent index %d is below the WAL snapshot's index %d and %s is missing: etcd cannot recover the backend", consistentIndex, snapshotIndex, want)
	}
	if err != nil {
		return "", fmt.Errorf("looking for the snapshot database of index %d in %s: %w", snapshotIndex, snapDir, err)
	}
	sb, err := openDB(path)
	if err != nil {
		return "", err
	}
	defer sb.close()
	f, err := sb.read()
	if err != nil {
		return "", err
	}
	if f.consistentIndex != 0 && f.consistentIndex < snapshotIndex {
		return "", corrupt(CheckDBBehindSnapshot, "database file (%s index %d) does not match with snapshot (index %d)", path, f.consistentIndex, snapshotIndex)
	}
	return fmt.Sprintf("the backend's consistent index %d is below the WAL snapshot's index %d: etcd recovers the backend from %s (consistent index %d)", consistentIndex, snapshotIndex, path, f.consistentIndex), nil
}
