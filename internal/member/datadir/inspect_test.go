package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

func TestInspect(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup turns a copy of the golden data dir into the case's; nil keeps it.
		setup func(t *testing.T, dir string)
		state State
		check Check
		// reason, when set, must be in Report.Reason; notes is the count of Report.Notes.
		reason string
		notes  int
		// transient: Inspect must return an error (and no verdict); errIs, when set, must
		// match it.
		transient bool
		errIs     error
	}{
		{name: "etcd's own data dir is valid", state: Valid},
		{name: "no data dir", setup: func(t *testing.T, dir string) { removeAll(t, dir) }, state: Empty},
		{name: "a data dir without a member directory", state: Empty, setup: func(t *testing.T, dir string) {
			removeAll(t, filepath.Join(dir, "member"))
			writeFile(t, filepath.Join(dir, "stray"), []byte("x"))
		}},
		{name: "an empty member directory", state: Empty, setup: func(t *testing.T, dir string) {
			removeAll(t, filepath.Join(dir, "member"))
			mkdir(t, filepath.Join(dir, "member"))
		}},
		{name: "a member directory with empty snap and wal directories", state: Empty, setup: func(t *testing.T, dir string) {
			removeAll(t, filepath.Join(dir, "member"))
			mkdir(t, filepath.Join(dir, "member", "snap"))
			mkdir(t, filepath.Join(dir, "member", "wal"))
		}},

		// The WAL.
		{name: "no WAL beside the backend", state: Corrupt, check: CheckWALMissing, setup: func(t *testing.T, dir string) {
			removeAll(t, filepath.Join(dir, "member", "wal"))
		}},
		{name: "a garbled record in a WAL file (bad CRC)", state: Corrupt, check: CheckWALUnreadable, reason: "crc mismatch",
			setup: func(t *testing.T, dir string) {
				first := walFiles(t, dir)[0]
				f := frames(t, first)[4]
				garble(t, first, f.off+8+f.size/2)
			}},
		{name: "a WAL file before the last cut short", state: Corrupt, check: CheckWALUnreadable, reason: "is not the last file",
			setup: func(t *testing.T, dir string) {
				files := walFiles(t, dir)
				fr := frames(t, files[len(files)-2])
				last := fr[len(fr)-1]
				truncate(t, files[len(files)-2], last.off+last.size/2)
			}},
		{name: "a WAL file missing from the sequence", state: Corrupt, check: CheckWALSequence, reason: "skip from",
			setup: func(t *testing.T, dir string) { remove(t, walFiles(t, dir)[1]) }},
		{name: "a torn last record, which etcd repairs", state: Valid, notes: 1,
			setup: func(t *testing.T, dir string) {
				files := walFiles(t, dir)
				fr := frames(t, files[len(files)-1])
				last := fr[len(fr)-1]
				truncate(t, files[len(files)-1], last.off+last.size/2)
			}},

		// The backend.
		{name: "no backend beside the WAL", state: Corrupt, check: CheckDBMissing,
			setup: func(t *testing.T, dir string) { remove(t, dbPath(dir)) }},
		{name: "a backend of random bytes", state: Corrupt, check: CheckDBInvalid, reason: "invalid database",
			setup: func(t *testing.T, dir string) {
				garbage := make([]byte, 64<<10)
				r := rand.New(rand.NewPCG(1, 2))
				for i := range garbage {
					garbage[i] = byte(r.Uint32())
				}
				writeFile(t, dbPath(dir), garbage)
			}},
		{name: "a backend cut inside its second meta page", state: Corrupt, check: CheckDBInvalid, reason: "file size too small",
			setup: func(t *testing.T, dir string) { truncate(t, dbPath(dir), 4096+2048) }},
		{name: "a backend shorter than its meta page counts", state: Corrupt, check: CheckDBTruncated,
			setup: func(t *testing.T, dir string) {
				size, page := boltSize(t, dbPath(dir))
				truncate(t, dbPath(dir), size-int64(page))
			}},
		{name: "a new, empty bbolt backend behind the WAL's snapshot", state: Corrupt, check: CheckDBBehindSnapshot, reason: "is missing",
			setup: func(t *testing.T, dir string) {
				remove(t, dbPath(dir))
				newBolt(t, dbPath(dir))
			}},
		{name: "an empty backend file behind the WAL's snapshot", state: Corrupt, check: CheckDBBehindSnapshot,
			setup: func(t *testing.T, dir string) { writeFile(t, dbPath(dir), nil) }},
		{name: "a backend behind the snapshot, with the snapshot's database there", state: Valid, notes: 2,
			setup: func(t *testing.T, dir string) {
				snapDB := filepath.Join(dir, "member", "snap", fmt.Sprintf("%016x.snap.db", newestSnapshot(t, dir)))
				if err := os.Rename(dbPath(dir), snapDB); err != nil {
					t.Fatal(err)
				}
				newBolt(t, dbPath(dir))
			}},

		// No verdict: the caller tries again.
		{name: "the backend locked by another process", transient: true, errIs: berrors.ErrTimeout,
			setup: func(t *testing.T, dir string) { lockExclusive(t, dbPath(dir)) }},
		{name: "a directory where the backend file should be", transient: true, setup: func(t *testing.T, dir string) {
			remove(t, dbPath(dir))
			mkdir(t, dbPath(dir))
		}},
		{name: "a directory where a WAL file should be", transient: true, errIs: syscall.EISDIR, setup: func(t *testing.T, dir string) {
			files := walFiles(t, dir)
			remove(t, files[len(files)-1])
			mkdir(t, files[len(files)-1])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := goldenDir(t)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			r, err := Inspect(dir)
			t.Logf("report %+v, error %v", r, err)
			if tc.transient {
				if err == nil {
					t.Fatalf("want an error, got %s %s: %s", r.State, r.Check, r.Reason)
				}
				if tc.errIs != nil && !errors.Is(err, tc.errIs) {
					t.Errorf("error %v, want one matching %v", err, tc.errIs)
				}
				if r.State != "" {
					t.Errorf("an error with a verdict: %s", r.State)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if r.State != tc.state || r.Check != tc.check {
				t.Fatalf("got %s %q (%s), want %s %q", r.State, r.Check, r.Reason, tc.state, tc.check)
			}
			if !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("reason %q does not say %q", r.Reason, tc.reason)
			}
			if r.State == Corrupt && r.Reason == "" {
				t.Error("a Corrupt verdict without a reason")
			}
			// The WAL is read before a backend's verdict: the member whose data is lost is known.
			if strings.HasPrefix(string(r.Check), "db/") && (r.MemberID != golden.memberID || r.ClusterID != golden.clusterID) {
				t.Errorf("member %x cluster %x, want etcd's %x %x", r.MemberID, r.ClusterID, golden.memberID, golden.clusterID)
			}
			if len(r.Notes) != tc.notes {
				t.Errorf("notes %q, want %d", r.Notes, tc.notes)
			}
			if r.State == Valid {
				checkValid(t, dir, r)
			}
		})
	}
}

// checkValid compares a Valid report with what etcd said while it ran.
func checkValid(t *testing.T, dir string, r Report) {
	t.Helper()
	if r.MemberID != golden.memberID || r.ClusterID != golden.clusterID {
		t.Errorf("member %x cluster %x, want %x %x (etcd's)", r.MemberID, r.ClusterID, golden.memberID, golden.clusterID)
	}
	if want := newestSnapshot(t, dir); r.SnapshotIndex != want || want == 0 {
		t.Errorf("snapshot index %d, want %d (not 0)", r.SnapshotIndex, want)
	}
	if r.LastIndex < r.SnapshotIndex || r.CommitIndex > r.LastIndex || r.CommitIndex < goldenPuts {
		t.Errorf("snapshot %d, commit %d, last %d: want commit >= %d puts, within the log", r.SnapshotIndex, r.CommitIndex, r.LastIndex, goldenPuts)
	}
	if r.WALFiles < 3 {
		t.Errorf("%d WAL files, want the golden's several", r.WALFiles)
	}
	info, err := os.Stat(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if r.DBSize != info.Size() {
		t.Errorf("db size %d, want %d", r.DBSize, info.Size())
	}
	if r.Notes == nil && (r.ConsistentIndex < r.SnapshotIndex || r.ConsistentIndex < goldenPuts || r.Term == 0) {
		t.Errorf("consistent index %d term %d, want at least the snapshot's %d and the %d puts", r.ConsistentIndex, r.Term, r.SnapshotIndex, goldenPuts)
	}
	if r.Notes == nil && r.StorageVersion == "" {
		t.Error("no storage version read")
	}
}

func TestInspectNeverWrites(t *testing.T) {
	dir := goldenDir(t)
	before := treeState(t, dir)
	if _, err := Inspect(dir); err != nil {
		t.Fatal(err)
	}
	if after := treeState(t, dir); after != before {
		t.Errorf("the data dir changed:\n%s\nbecame\n%s", before, after)
	}
}

func treeState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data := []byte{}
		if info.Mode().IsRegular() {
			if data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		fmt.Fprintf(&b, "%s %s %d %x\n", p, info.Mode(), info.Size(), hash(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func hash(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

func TestIsWALVerdict(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"crc mismatch", fmt.Errorf("%w: in file x", wal.ErrCRCMismatch), true},
		{"snapshot not found", wal.ErrSnapshotNotFound, true},
		{"metadata conflict", wal.ErrMetadataConflict, true},
		{"a record that does not decode", protoError(t), true},
		{"permission denied", &fs.PathError{Op: "open", Path: "x.wal", Err: syscall.EACCES}, false},
		{"I/O error", &fs.PathError{Op: "read", Path: "x.wal", Err: syscall.EIO}, false},
		{"file gone", fmt.Errorf("[openWALFiles]: %w", fs.ErrNotExist), false},
		{"a record type this etcd does not know", errors.New("unexpected block type 9"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isWALVerdict(tc.err); got != tc.want {
				t.Errorf("isWALVerdict(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// protoError is what etcd's decoder returns for a record that does not decode.
func protoError(t *testing.T) error {
	t.Helper()
	var rec walpb.Record
	err := proto.Unmarshal([]byte{0xff, 0xff, 0xff}, &rec)
	if err == nil {
		t.Fatal("garbage decoded")
	}
	return err
}

func TestOpenFailed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "db")
	writeFile(t, file, []byte("not bbolt"))
	notAFile := t.TempDir()
	for _, tc := range []struct {
		name    string
		path    string
		err     error
		corrupt bool
	}{
		{"bbolt's verdict, the file reads", file, berrors.ErrInvalid, true},
		{"bbolt's checksum verdict, the file reads", file, fmt.Errorf("meta0: %w", berrors.ErrChecksum), true},
		// bbolt says ErrInvalid when it cannot read its meta pages at all.
		{"bbolt's verdict, but the file does not read", notAFile, berrors.ErrInvalid, false},
		{"the lock is held", file, berrors.ErrTimeout, false},
		{"permission denied", file, &fs.PathError{Op: "open", Path: file, Err: syscall.EACCES}, false},
		{"mmap fails", file, syscall.ENOMEM, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&backend{path: tc.path}).openFailed(tc.err)
			var c *corruptError
			if got := errors.As(err, &c); got != tc.corrupt {
				t.Errorf("openFailed(%v) = %v: corrupt %v, want %v", tc.err, err, got, tc.corrupt)
			}
		})
	}
}

// fault is what the runtime panics with on a memory fault under debug.SetPanicOnFault.
type fault uintptr

func (f fault) Error() string { return fmt.Sprintf("unexpected fault address %#x", uintptr(f)) }
func (f fault) Addr() uintptr { return uintptr(f) }

func TestPanicked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	newBolt(t, path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	info, _ := os.Stat(path)
	b := &backend{path: path, size: info.Size(), db: db}
	base := db.Info().Data
	for _, tc := range []struct {
		name    string
		p       any
		corrupt bool
	}{
		{"a fault inside the file (a page that did not read)", fault(base + 10), false},
		{"a fault beyond the file's end", fault(base + uintptr(b.size) + 4096), true},
		{"bbolt's own panic on a page", "invalid page type", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *corruptError
			if got := errors.As(b.panicked(tc.p), &c); got != tc.corrupt {
				t.Errorf("corrupt %v, want %v", got, tc.corrupt)
			}
		})
	}
}

func TestCheckCamelCase(t *testing.T) {
	reason := regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)
	for _, c := range []Check{CheckWALMissing, CheckWALSequence, CheckWALUnreadable, CheckWALMetadata, CheckWALCommit,
		CheckDBMissing, CheckDBInvalid, CheckDBTruncated, CheckDBUnreadable, CheckDBBehindSnapshot} {
		if !reason.MatchString(c.CamelCase()) {
			t.Errorf("%s: %q is not a condition reason", c, c.CamelCase())
		}
	}
	if got := CheckDBBehindSnapshot.CamelCase(); got != "DbBehindSnapshot" {
		t.Errorf("got %q", got)
	}
}

func dbPath(dir string) string { return filepath.Join(dir, "member", "snap", "db") }

// newestSnapshot is the snapshot index etcd starts from, read with etcd's function.
func newestSnapshot(t *testing.T, dir string) uint64 {
	t.Helper()
	snaps, err := wal.ValidSnapshotEntries(zap.NewNop(), filepath.Join(dir, "member", "wal"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("snapshot entries %v: %v", snaps, err)
	}
	return snaps[len(snaps)-1].GetIndex()
}

// boltSize returns what a backend's meta page counts and its page size.
func boltSize(t *testing.T, path string) (int64, int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var size int64
	if err := db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return size, db.Info().PageSize
}

// newBolt writes an empty bbolt database: valid to bbolt, without etcd's buckets.
func newBolt(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// lockExclusive holds the exclusive flock a running etcd (bbolt read-write) holds on its backend,
// through another open file description, until the test ends.
func lockExclusive(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

func garble(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0x5a
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func removeAll(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

// TestInspectWrittenWAL judges WALs written with etcd's own writer (wal.Create, WAL.Save) where a
// running etcd cannot be made to write them: the metadata and the HardState are what is wrong.
func TestInspectWrittenWAL(t *testing.T) {
	member := func(node, cluster uint64) []byte {
		b, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: &node, ClusterID: &cluster})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		metadata []byte
		commit   uint64 // entries 1..3 are written
		state    State
		check    Check
	}{
		{name: "member 7 of cluster 9, commit within the log", metadata: member(7, 9), commit: 3, state: Valid},
		{name: "metadata naming member 0", metadata: member(0, 9), commit: 3, state: Corrupt, check: CheckWALMetadata},
		{name: "metadata that does not decode", metadata: []byte{0xff, 0xff}, commit: 3, state: Corrupt, check: CheckWALMetadata},
		{name: "a HardState committing beyond the last entry", metadata: member(7, 9), commit: 5, state: Corrupt, check: CheckWALCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			w, err := wal.Create(zap.NewNop(), filepath.Join(dir, "member", "wal"), tc.metadata)
			if err != nil {
				t.Fatal(err)
			}
			var ents []*raftpb.Entry
			for i := uint64(1); i <= 3; i++ {
				ents = append(ents, &raftpb.Entry{Term: new(uint64(1)), Index: new(i), Data: []byte("x")})
			}
			if err := w.Save(&raftpb.HardState{Term: new(uint64(1)), Commit: new(tc.commit)}, ents); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			mkdir(t, filepath.Join(dir, "member", "snap"))
			newBolt(t, dbPath(dir))

			r, err := Inspect(dir)
			t.Logf("report %+v, error %v", r, err)
			if err != nil {
				t.Fatal(err)
			}
			if r.State != tc.state || r.Check != tc.check {
				t.Fatalf("got %s %q (%s), want %s %q", r.State, r.Check, r.Reason, tc.state, tc.check)
			}
			if r.State == Valid && (r.MemberID != 7 || r.ClusterID != 9 || r.CommitIndex != 3 || r.LastIndex != 3) {
				t.Errorf("member %d cluster %d commit %d last %d, want 7 9 3 3", r.MemberID, r.ClusterID, r.CommitIndex, r.LastIndex)
			}
		})
	}
}
