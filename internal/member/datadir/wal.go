package datadir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// walFile is one WAL file, named as etcd names them: <seq>-<index>.wal in hex.
type walFile struct {
	name       string
	seq, index uint64
}

// walFacts is what the WAL says.
type walFacts struct {
	memberID, clusterID              uint64
	snapshotIndex, commit, lastIndex uint64
	notes                            []string
}

// walNames lists the WAL files in walDir in etcd's order, as etcd's readWALNames does; a
// missing directory holds none.
func walNames(walDir string) ([]walFile, error) {
	entries, err := os.ReadDir(walDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []walFile
	for _, e := range entries {
		var f walFile
		if !strings.HasSuffix(e.Name(), ".wal") {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "%016x-%016x.wal", &f.seq, &f.index); err != nil {
			continue
		}
		f.name = e.Name()
		files = append(files, f)
	}
	return files, nil
}

// readWAL reads the WAL as etcd's bootstrap does (recoverSnapshot, openWALFromSnapshot), without
// writing: the newest valid snapshot entry, then every record after it.
func readWAL(walDir string, files []walFile) (walFacts, error) {
	if err := checkSequence(walDir, files); err != nil {
		return walFacts{}, err
	}
	lg := zap.NewNop()
	var snaps []*walpb.Snapshot
	err := etcdCall(walDir, func() (err error) {
		snaps, err = wal.ValidSnapshotEntries(lg, walDir)
		return err
	})
	if err != nil {
		return walFacts{}, err
	}
	start := &walpb.Snapshot{}
	if len(snaps) > 0 {
		start = snaps[len(snaps)-1]
	}
	from, err := selectFiles(walDir, files, start.GetIndex())
	if err != nil {
		return walFacts{}, err
	}

	var (
		metadata []byte
		ents     int
		last     uint64
		commit   uint64
	)
	err = etcdCall(walDir, func() error {
		w, err := wal.OpenForRead(lg, walDir, start)
		if err != nil {
			return err
		}
		defer w.Close()
		md, st, es, err := w.ReadAll()
		if err != nil {
			return err
		}
		metadata, ents, commit = md, len(es), st.GetCommit()
		if ents > 0 {
			last = es[ents-1].GetIndex()
		}
		return nil
	})
	if err != nil {
		return walFacts{}, err
	}
	f := walFacts{snapshotIndex: start.GetIndex(), commit: commit, lastIndex: start.GetIndex()}
	if ents > 0 {
		f.lastIndex = last
	}

	if metadata == nil {
		return walFacts{}, corrupt(CheckWALMetadata, "the WAL in %s holds no metadata record", walDir)
	}
	var md etcdserverpb.Metadata
	if err := proto.Unmarshal(metadata, &md); err != nil {
		return walFacts{}, corrupt(CheckWALMetadata, "the WAL metadata in %s does not decode: %v", walDir, err)
	}
	f.memberID, f.clusterID = md.GetNodeID(), md.GetClusterID()
	if f.memberID == 0 {
		return walFacts{}, corrupt(CheckWALMetadata, "the WAL metadata in %s names member ID 0, which raft refuses", walDir)
	}
	// raft's loadState panics when the HardState commits beyond the log.
	if f.commit > f.lastIndex {
		return walFacts{}, corrupt(CheckWALCommit, "the WAL in %s commits index %d but its last entry is %d (raft: the log was truncated or lost)", walDir, f.commit, f.lastIndex)
	}

	for i, file := range from {
		torn, err := scanFile(filepath.Join(walDir, file.name))
		if err != nil {
			return walFacts{}, err
		}
		if torn < 0 {
			continue
		}
		if i < len(from)-1 {
			return walFacts{}, corrupt(CheckWALUnreadable, "WAL file %s ends in a short or torn record at offset %d and is not the last file (etcd repairs only the last)", file.name, torn)
		}
		f.notes = append(f.notes, fmt.Sprintf("WAL file %s ends in a torn record at offset %d: etcd truncates it there at start (wal.Repair)", file.name, torn))
	}
	return f, nil
}

// checkSequence checks that no WAL file is missing between the first and the last: etcd purges
// only the oldest, and checks the sequence from the snapshot's file on (selectWALFiles).
func checkSequence(walDir string, files []walFile) error {
	for i := 1; i < len(files); i++ {
		if files[i].seq != files[i-1].seq+1 {
			return corrupt(CheckWALSequence, "the WAL files in %s skip from %s to %s", walDir, files[i-1].name, files[i].name)
		}
	}
	return nil
}

// selectFiles returns the files etcd reads from the snapshot at index on: from the last one
// that starts at or before it (selectWALFiles, which says so without a sentinel error).
func selectFiles(walDir string, files []walFile, index uint64) ([]walFile, error) {
	for i := len(files) - 1; i >= 0; i-- {
		if index >= files[i].index {
			return files[i:], nil
		}
	}
	return nil, corrupt(CheckWALSequence, "no WAL file in %s starts at or before the snapshot's index %d (the first is %s)", walDir, index, files[0].name)
}

// scanFile decodes one WAL file with etcd's decoder, as wal.Repair does with the last one, and
// returns the offset of a short or torn record ending it, or -1 when it ends cleanly.
func scanFile(path string) (int64, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	dec := wal.NewDecoder(fileutil.NewFileReader(file))
	rec := &walpb.Record{}
	for {
		err := dec.Decode(rec)
		switch {
		case err == nil:
			if rec.GetType() == wal.CrcType {
				if crc := dec.LastCRC(); crc != 0 && rec.Validate(crc) != nil {
					return 0, corrupt(CheckWALUnreadable, "WAL file %s: %v at offset %d", filepath.Base(path), wal.ErrCRCMismatch, dec.LastOffset())
				}
				dec.UpdateCRC(rec.GetCrc())
			}
		case errors.Is(err, io.EOF):
			return -1, nil
		case errors.Is(err, io.ErrUnexpectedEOF):
			return dec.LastOffset(), nil
		case isWALVerdict(err):
			return 0, corrupt(CheckWALUnreadable, "WAL file %s: %v", filepath.Base(path), err)
		default:
			return 0, fmt.Errorf("reading WAL file %s: %w", path, err)
		}
	}
}

// etcdCall runs one call into etcd's wal package and sorts its failure: a verdict on the
// content becomes a corruptError, a panic too (etcd would panic on the same bytes), anything
// else stays a (transient) error.
func etcdCall(walDir string, call func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = corrupt(CheckWALUnreadable, "etcd's wal package panicked reading %s: %v", walDir, p)
		}
	}()
	err = call()
	switch {
	case err == nil:
		return nil
	case isWALVerdict(err):
		return corrupt(CheckWALUnreadable, "etcd's wal package rejects %s: %v", walDir, err)
	default:
		return fmt.Errorf("reading the WAL in %s: %w", walDir, err)
	}
}

// isWALVerdict tells whether err, from etcd's wal package, judges the WAL's content. An error
// from the operating system, or a record type this etcd does not know (a newer etcd's WAL), is
// not a verdict.
func isWALVerdict(err error) bool {
	for _, v := range []error{wal.ErrCRCMismatch, wal.ErrMetadataConflict, wal.ErrSnapshotMismatch, wal.ErrSnapshotNotFound, wal.ErrSliceOutOfRange} {
		if errors.Is(err, v) {
			return true
		}
	}
	return errors.Is(err, proto.Error)
}
