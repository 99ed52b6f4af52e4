package restore

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	bolt "go.etcd.io/bbolt"
	etcdutlsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/datadir"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Options says what to restore and as which member.
type Options struct {
	// Chain is the full snapshot and the deltas that continue it (snapshot.Latest).
	Chain snapshot.Chain
	// FullOrigin is who wrote the full snapshot, when recorded: no delta of another etcd
	// cluster is replayed onto it.
	FullOrigin *snapshot.Origin
	// Open reads one object of the chain by its key (snapshot.Snapshot.Key, below the store's
	// prefix).
	Open func(ctx context.Context, key string) (io.ReadCloser, error)
	// DataDir is the member's data dir. It must hold no member data: a restore never writes over
	// data (an empty dir, or one without a member directory, is replaced).
	DataDir string
	// Name, PeerURL and Token are the restored member's etcd name, advertised peer URL and the
	// new cluster's initial-cluster-token; a new token gives the new cluster a new cluster ID.
	Name    string
	PeerURL string
	Token   string
	Log     logr.Logger
	// RevisionBump raises the restored member's revision this far above the backup's and marks
	// every revision up to it compacted, as etcd documents for a restore under Kubernetes: the
	// old cluster may have served revisions after the last backup, and a client that saw them (a
	// kube-apiserver's watch cache, an informer) must not take the restored keyspace for an
	// older state of the one it watched. Compacted, a watch or read from such a revision fails
	// with ErrCompacted and the client lists afresh. 0: no bump (tests that compare revisions).
	RevisionBump int64
	// Retry bounds the reads of one object; the zero value is DefaultRetry.
	Retry Retry
	// afterRevision, when set (tests), runs after each replayed source revision.
	afterRevision func(rev int64)
}

// Retry is how often, and how patiently, a failed read of one object is tried again.
type Retry struct {
	Attempts int
	// First is the wait after the first failure; it doubles up to Max.
	First, Max time.Duration
}

// DefaultRevisionBump is the bump etcd's documentation gives for a restore under Kubernetes:
// far more revisions than a cluster writes between two delta snapshots, and still nothing next to
// the int64 revision space (9.2e18: nine billion restores).
const DefaultRevisionBump int64 = 1_000_000_000

// DefaultRetry rides out a store's restart or a network blip of about a minute.
var DefaultRetry = Retry{Attempts: 6, First: time.Second, Max: 30 * time.Second}

// Result says what was restored, with the figures a report needs.
type Result struct {
	// Full names the full snapshot restored; FullRevision is the revision its content holds;
	// Revision the revision reached after the deltas; WantedRevision what the chain would reach.
	Full                                   string
	FullRevision, Revision, WantedRevision int64
	DeltasApplied, DeltasInChain           int
	// EventsApplied counts the replayed events (puts and deletes).
	EventsApplied int
	// Stopped says why the replay ended before WantedRevision, naming the revisions not
	// restored ("" when it did not).
	Stopped string
	// FellBack lists the newer full snapshots that could not be used, and why.
	FellBack []string
	// Checked says how the restored keyspace was checked against the chain.
	Checked string
	// HashChecked: the full snapshot carried etcd's SHA-256 trailer and it matched.
	HashChecked bool
	// Bytes is what was read from the store (full snapshot and deltas, as stored); DBBytes the
	// size of the database the member starts from.
	Bytes, DBBytes int64
	// ServedRevision is the revision the restored member starts at: Revision raised by the
	// bump, every revision up to it compacted (Revision when no bump was asked).
	ServedRevision int64
	// Keys is the number of keys in the restored database.
	Keys     int
	Duration time.Duration
}

func (r Result) String() string {
	s := fmt.Sprintf("full snapshot %s at revision %d, %d of %d deltas (%d events), revision %d of %d, %d keys, %d bytes read in %s",
		r.Full, r.FullRevision, r.DeltasApplied, r.DeltasInChain, r.EventsApplied, r.Revision, r.WantedRevision, r.Keys, r.Bytes, r.Duration.Round(time.Millisecond))
	if r.ServedRevision > r.Revision {
		s += fmt.Sprintf("; revision bumped by %d to %d and marked compacted", r.ServedRevision-r.Revision, r.ServedRevision)
	}
	if r.Checked != "" {
		s += "; checked: " + r.Checked
	}
	if len(r.FellBack) > 0 {
		s += "; fell back from " + strings.Join(r.FellBack, ", ")
	}
	if r.Stopped != "" {
		s += "; " + memberlease.RestoreStoppedEarlyPrefix + r.Stopped
	}
	return s
}

// FullSnapshotError says a full snapshot cannot be restored (corrupt, truncated, not a
// database): a caller may fall back to an older one.
type FullSnapshotError struct {
	Name string
	Err  error
}

func (e *FullSnapshotError) Error() string { return fmt.Sprintf("full snapshot %s: %v", e.Name, e.Err) }
func (e *FullSnapshotError) Unwrap() error { return e.Err }

// MismatchError says the restored keyspace is not what the chain records: the member must not
// start from it.
type MismatchError struct{ Detail string }

func (e *MismatchError) Error() string {
	return "the restored keyspace does not match the backup: " + e.Detail
}

// Restore writes the member's data dir from the chain. On error nothing is left in DataDir.
func Restore(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	res := Result{Full: o.Chain.Full.Name(), FullRevision: o.Chain.Full.EndRevision, WantedRevision: o.Chain.EndRevision(), DeltasInChain: len(o.Chain.Deltas)}
	if o.Retry.Attempts == 0 {
		o.Retry = DefaultRetry
	}
	if err := checkTarget(o.DataDir); err != nil {
		return res, err
	}
	// Scratch space next to the data dir: the same volume, so the final rename is atomic, and
	// leftovers of an attempt that died are this package's own and removed.
	work := o.DataDir + ".restore-work"
	if err := os.RemoveAll(work); err != nil {
		return res, fmt.Errorf("clearing %s: %w", work, err)
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return res, fmt.Errorf("creating %s: %w", work, err)
	}
	defer os.RemoveAll(work)

	db := filepath.Join(work, "full.db")
	read, _, err := fetch(ctx, o, o.Chain.Full, func(r io.Reader) error { return writeFile(db, r) })
	res.Bytes += read
	var verify *backupstore.VerifyError
	var content contentError
	switch {
	case errors.As(err, &verify), errors.As(err, &content):
		return res, &FullSnapshotError{Name: o.Chain.Full.Name(), Err: err}
	case err != nil:
		// The store did not answer (or the object went): no reason to take an older snapshot,
		// the restore is tried again.
		return res, fmt.Errorf("reading full snapshot %s: %w", o.Chain.Full.Name(), err)
	}
	if res.HashChecked, err = stripHash(db); err != nil {
		return res, &FullSnapshotError{Name: o.Chain.Full.Name(), Err: err}
	}
	if err := checkDB(db); err != nil {
		return res, &FullSnapshotError{Name: o.Chain.Full.Name(), Err: err}
	}
	// Room for etcd's copy of the database and its first WAL file, before anything grows: a
	// restore short of space says so with the numbers rather than failing on a write.
	if err := checkSpaceFor(db); err != nil {
		return res, err
	}
	if err := replayChain(ctx, o, &res, db); err != nil {
		return res, err
	}
	if err := checkSpaceFor(db); err != nil { // the replay grew it
		return res, err
	}

	staged := o.DataDir + ".restoring"
	if err := os.RemoveAll(staged); err != nil {
		return res, fmt.Errorf("clearing %s: %w", staged, err)
	}
	if o.RevisionBump < 0 {
		return res, fmt.Errorf("a revision bump of %d: it must not be negative", o.RevisionBump)
	}
	if err := restoreDB(db, staged, o.Name, o.PeerURL, o.Token, o.RevisionBump); err != nil {
		return res, fmt.Errorf("restoring %s as member %s: %w", o.Chain.Full.Name(), o.Name, err)
	}
	// etcd's restore copied it: the copy is all that is needed from here on.
	_ = os.Remove(db)
	if st, err := etcdutlsnapshot.NewV3(zap.NewNop()).Status(filepath.Join(staged, "member", "snap", "db")); err == nil {
		res.Keys, res.DBBytes, res.ServedRevision = st.TotalKey, st.TotalSize, st.Revision
		if o.RevisionBump > 0 && res.Keys > 0 {
			res.Keys-- // the bump is marked by a revision holding no key, which Status counts as one
		}
	}
	if err := os.RemoveAll(o.DataDir); err != nil { // checked above: holds no member data
		return res, fmt.Errorf("replacing %s: %w", o.DataDir, err)
	}
	if err := os.Rename(staged, o.DataDir); err != nil {
		return res, fmt.Errorf("moving the restored data into %s: %w", o.DataDir, err)
	}
	res.Duration = time.Since(start)
	return res, nil
}

// walReserve is the WAL file etcd's restore preallocates beside the database.
const walReserve = 64 << 20

// checkSpaceFor checks there is room for a copy of db and the WAL on its volume.
func checkSpaceFor(db string) error {
	st, err := os.Stat(db)
	if err != nil {
		return err
	}
	if err := CheckFreeSpace(filepath.Dir(db), st.Size()+walReserve); err != nil {
		return fmt.Errorf("restoring a %d-byte database: %w", st.Size(), err)
	}
	return nil
}

// replayChain replays the chain's deltas onto db and checks the result against what the chain
// records.
func replayChain(ctx context.Context, o Options, res *Result, db string) error {
	rp := openReplayer(db)
	defer rp.close()
	res.FullRevision, res.Revision = rp.rev(), rp.rev()
	if res.FullRevision != o.Chain.Full.EndRevision {
		// The name is a lower bound (the writer reads the revision before the snapshot starts):
		// the content is what counts.
		o.Log.V(1).Info("Full snapshot holds a later revision than its name says", "name", o.Chain.Full.Name(), "revision", res.FullRevision)
	}
	startKeys, err := rp.count(ctx)
	if err != nil {
		return err
	}
	var (
		t       tally
		last    *snapshot.DeltaFile
		cluster string
	)
	if o.FullOrigin != nil {
		cluster = o.FullOrigin.ClusterID
	}
	stop := func(format string, args ...any) {
		res.Stopped = fmt.Sprintf(format, args...) + fmt.Sprintf("; revisions %d..%d are not restored", rp.rev()+1, res.WantedRevision)
	}
	for _, d := range o.Chain.Deltas {
		if d.EndRevision <= rp.rev() {
			continue // the full snapshot already holds it
		}
		if d.StartRevision > rp.rev()+1 {
			stop("delta %s starts at revision %d, after the %d reached: a gap", d.Name(), d.StartRevision, rp.rev())
			break
		}
		f, n, read, err := replayDelta(ctx, o, rp, d, filepath.Join(filepath.Dir(db), "delta"), cluster, &t)
		res.Bytes += read
		res.EventsApplied += n
		res.Revision = rp.rev()
		var gap *gapError
		var bad *badDeltaError
		switch {
		case errors.As(err, &bad):
			stop("delta %s: %v", d.Name(), bad.err)
		case errors.As(err, &gap):
			stop("delta %s: %v", d.Name(), gap)
		case err != nil:
			return fmt.Errorf("replaying delta %s: %w", d.Name(), err)
		}
		if res.Stopped != "" {
			break
		}
		if f.Origin != nil && f.Origin.ClusterID != "" {
			cluster = f.Origin.ClusterID
		}
		if rp.rev() < f.EndRevision {
			stop("delta %s says it reaches revision %d, its events reach %d", d.Name(), f.EndRevision, rp.rev())
			break
		}
		res.DeltasApplied++
		last = &f
		o.Log.V(1).Info("Delta replayed", "delta", d.Name(), "events", n, "revision", res.Revision)
	}
	if res.Stopped == "" && o.Chain.Gap != "" {
		stop("%s", o.Chain.Gap)
	}
	return check(ctx, rp, res, last, startKeys, t)
}

// badDeltaError says a delta is verifiably damaged (read whole, and its checksum or content is
// wrong) or is not what its name says: the replay stops before it.
type badDeltaError struct{ err error }

func (e *badDeltaError) Error() string { return e.err.Error() }

// replayDelta reads delta d into a scratch file (its decompressed content: a delta is read
// twice, and memory holds one event at a time), verifies it whole, checks it continues the
// chain's cluster, then replays it. read is what the store sent, n the events applied.
func replayDelta(ctx context.Context, o Options, rp *replayer, d snapshot.Snapshot, spool, cluster string, t *tally) (f snapshot.DeltaFile, n int, read int64, err error) {
	defer os.Remove(spool)
	read, _, err = fetch(ctx, o, d, func(r io.Reader) error { return writeFile(spool, r) })
	switch {
	case damaged(err):
		return f, 0, read, &badDeltaError{err}
	case err != nil:
		// The store did not send it (down, throttling, the object listed but not found now):
		// nothing says the delta is damaged, so the restore fails and is tried again whole. Stopping
		// here would start the member without every later delta, acknowledged writes for good.
		return f, 0, read, fmt.Errorf("reading delta %s: %w", d.Name(), err)
	}
	var spoolErr error
	scan := func(each func(snapshot.Event) error) (snapshot.DeltaFile, error) {
		file, err := os.Open(spool)
		if err != nil {
			spoolErr = err
			return snapshot.DeltaFile{}, err
		}
		defer file.Close()
		src := &sourceReader{r: file}
		f, err := snapshot.ScanDelta(bufio.NewReaderSize(src, 1<<20), each)
		spoolErr = src.err
		return f, err
	}
	if f, err = scan(nil); err != nil {
		if spoolErr != nil {
			// The local copy could not be read back: the volume's fault, not the delta's.
			return f, 0, read, fmt.Errorf("reading back delta %s: %w", d.Name(), spoolErr)
		}
		return f, 0, read, &badDeltaError{err}
	}
	if f.StartRevision != d.StartRevision || f.EndRevision != d.EndRevision {
		return f, 0, read, &badDeltaError{fmt.Errorf("holds revisions %d..%d, its name says %d..%d", f.StartRevision, f.EndRevision, d.StartRevision, d.EndRevision)}
	}
	if f.Origin != nil && f.Origin.ClusterID != "" && cluster != "" && f.Origin.ClusterID != cluster {
		return f, 0, read, &badDeltaError{fmt.Errorf("written by etcd cluster %s, the chain before it by %s", f.Origin.ClusterID, cluster)}
	}
	ap := rp.applier(t, o.afterRevision)
	if _, err = scan(func(e snapshot.Event) error { return ap.feed(ctx, e) }); err == nil {
		err = ap.flush(ctx)
	}
	return f, ap.applied, read, err
}

// check compares the replayed keyspace with what the chain records: the writer's digest of the
// last delta applied when it has one, otherwise the key count its events imply.
func check(ctx context.Context, rp *replayer, res *Result, last *snapshot.DeltaFile, startKeys int64, t tally) error {
	switch {
	case last == nil:
		res.Checked = "the full snapshot's SHA-256 (no delta replayed)"
		if !res.HashChecked {
			res.Checked = "nothing: the full snapshot carries no SHA-256 and no delta was replayed"
		}
		return nil
	case last.End != nil && last.End.Revision == rp.rev():
		got, err := rp.digest(ctx)
		if err != nil {
			return err
		}
		if got.Keys != last.End.Keys || got.Sum != last.End.Sum {
			return &MismatchError{Detail: fmt.Sprintf("restored %s, the backup recorded %s", got, *last.End)}
		}
		res.Checked = fmt.Sprintf("revision %d, %d keys and their digest, as the backup recorded", got.Revision, got.Keys)
		return nil
	}
	keys, err := rp.count(ctx)
	if err != nil {
		return err
	}
	if t.unknownCreates > 0 {
		res.Checked = fmt.Sprintf("revision %d (the deltas record neither a digest nor key versions)", rp.rev())
		return nil
	}
	if want := startKeys + t.created - t.deleted; keys != want {
		return &MismatchError{Detail: fmt.Sprintf("%d keys at revision %d, the full snapshot's %d and the deltas' %d creations and %d deletions make %d",
			keys, rp.rev(), startKeys, t.created, t.deleted, want)}
	}
	res.Checked = fmt.Sprintf("revision %d and %d keys (the deltas record no digest)", rp.rev(), keys)
	return nil
}

// checkTarget refuses a data dir that holds member data: restoring never replaces data. What
// counts as data is datadir's one rule, the one the init step judged the data dir by.
func checkTarget(dir string) error {
	holds, err := datadir.HoldsMemberData(dir)
	switch {
	case err != nil:
		return fmt.Errorf("inspecting %s: %w", dir, err)
	case holds:
		return fmt.Errorf("%s holds member data: refusing to restore over it", dir)
	}
	return nil
}

// restoreDB is etcdutl's snapshot restore into dir, as a single-member cluster, the revision
// raised by bump and marked compacted (etcdutl's --bump-revision --mark-compacted).
func restoreDB(db, dir, name, peerURL, token string, bump int64) error {
	return etcdutlsnapshot.NewV3(zap.NewNop()).Restore(etcdutlsnapshot.RestoreConfig{
		RevisionBump:        uint64(bump),
		MarkCompacted:       bump > 0,
		SnapshotPath:        db,
		Name:                name,
		OutputDataDir:       dir,
		PeerURLs:            []string{peerURL},
		InitialCluster:      name + "=" + peerURL,
		InitialClusterToken: token,
		// stripHash checked and removed the trailer; the replay changed the database since.
		SkipHashCheck: true,
	})
}

// fetch reads one object and hands its decompressed content to use, retrying transient
// failures (the whole object again) as o.Retry allows; a checksum mismatch, a missing object or
// a content use refuses is not retried. It returns the bytes read from the store (last attempt)
// and the attempts made.
func fetch(ctx context.Context, o Options, s snapshot.Snapshot, use func(io.Reader) error) (int64, int, error) {
	wait := o.Retry.First
	for attempt := 1; ; attempt++ {
		read, err := fetchOnce(ctx, o.Open, s, use)
		if err == nil || attempt >= o.Retry.Attempts || !transient(ctx, err) {
			return read, attempt, err
		}
		o.Log.Info("Reading a backup object failed; trying again", "object", s.Name(), "attempt", attempt, "error", err.Error(), "retryIn", wait)
		select {
		case <-ctx.Done():
			return read, attempt, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, o.Retry.Max)
	}
}

// contentError marks an error of the object's content (decompression, format, checksum inside
// it): reading it again gives the same bytes.
type contentError struct{ error }

func (e contentError) Unwrap() error { return e.error }

func fetchOnce(ctx context.Context, open func(context.Context, string) (io.ReadCloser, error), s snapshot.Snapshot, use func(io.Reader) error) (int64, error) {
	r, err := open(ctx, s.Key())
	if err != nil {
		return 0, err
	}
	defer r.Close()
	counted := &countingReader{r: r}
	content, err := snapshot.Decompress(counted, s.Compression)
	if err != nil {
		return counted.n, contentError{err}
	}
	defer content.Close()
	src := &sourceReader{r: content}
	if err := use(src); err != nil {
		if src.err != nil {
			// The store's stream failed (or its checksum did not match) under the decoder.
			return counted.n, src.err
		}
		return counted.n, contentError{err}
	}
	return counted.n, nil
}

// sourceReader remembers a read error of the stream beneath, so one the store caused is told
// from one the content caused.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// damaged says the object was read and is not what was written: its checksum does not match,
// or its content does not decode. Only such verified damage ends a chain early; an object the
// store did not send is an error, and the restore is tried again.
func damaged(err error) bool {
	var verify *backupstore.VerifyError
	var content contentError
	return errors.As(err, &verify) || errors.As(err, &content)
}

// transient says whether reading the object again may succeed.
func transient(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !damaged(err) && !missing(err)
}

// missing says the store holds no object of that key (a Local store's file gone included).
func missing(err error) bool {
	return errors.Is(err, backupstore.ErrNotFound) || errors.Is(err, os.ErrNotExist)
}

func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stripHash checks and removes the SHA-256 etcd appends to a snapshot (Maintenance.Snapshot),
// present when the size is 32 past a page boundary; false when there is none.
func stripHash(db string) (bool, error) {
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	size := st.Size()
	if size%512 != sha256.Size {
		return false, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size-sha256.Size)); err != nil {
		return false, err
	}
	want := make([]byte, sha256.Size)
	if _, err := f.ReadAt(want, size-sha256.Size); err != nil {
		return false, err
	}
	if got := h.Sum(nil); string(got) != string(want) {
		return false, fmt.Errorf("its SHA-256 is %x, its trailer says %x: corrupt", got, want)
	}
	if err := f.Truncate(size - sha256.Size); err != nil {
		return false, err
	}
	return true, f.Close()
}

// checkDB checks the database's size against its meta page, then opens it read-only and checks
// bbolt's consistency, so a corrupt full snapshot is an error here and not a crash in the
// storage layer.
func checkDB(db string) error {
	if err := checkDBSize(db); err != nil {
		return err
	}
	b, err := bolt.Open(db, 0o600, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("not a database: %w", err)
	}
	defer b.Close()
	return b.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("key")) == nil {
			return errors.New("holds no key bucket: not an etcd database")
		}
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("bbolt consistency check: %w", errors.Join(errs...))
		}
		return nil
	})
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
