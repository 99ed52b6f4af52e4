package snapshot

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind tells a full snapshot from a delta.
type Kind string

const (
	// KindFull is a whole database (bbolt) at EndRevision.
	KindFull Kind = "Full"
	// KindDelta is the events of revisions StartRevision..EndRevision, both included.
	KindDelta Kind = "Incr"
)

// Dir is the folder below the store prefix that holds the snapshots (etcd-backup-restore's v2).
const Dir = "v2/"

// Snapshot is one backup object, as named in the store.
type Snapshot struct {
	Kind Kind
	// StartRevision is 0 for a full snapshot, and the first revision a delta holds.
	StartRevision int64
	// EndRevision is the revision the database is at once this snapshot is applied.
	EndRevision int64
	// CreatedOn is when the snapshot was taken, to the second.
	CreatedOn time.Time
	// Compression is how the object is compressed, from its name's suffix.
	Compression Compression
	// Final marks etcd-backup-restore's last full snapshot before its member stopped
	// (".final"). It is a full snapshot like any other to a restore; the name must keep it so
	// the object can be read and deleted by its key.
	Final bool
}

// finalSuffix ends the name of a final full snapshot.
const finalSuffix = ".final"

// Full names a full snapshot of the database at revision rev taken at t.
func Full(rev int64, t time.Time) Snapshot {
	return Snapshot{Kind: KindFull, StartRevision: 0, EndRevision: rev, CreatedOn: t.UTC().Truncate(time.Second)}
}

// Delta names the events of revisions start..end, taken at t.
func Delta(start, end int64, t time.Time) Snapshot {
	return Snapshot{Kind: KindDelta, StartRevision: start, EndRevision: end, CreatedOn: t.UTC().Truncate(time.Second)}
}

// Name is the object's base name, e.g. Full-00000000-00001234-1795000000 or, gzip-compressed,
// Full-00000000-00001234-1795000000.gz.
func (s Snapshot) Name() string {
	name := fmt.Sprintf("%s-%08d-%08d-%d%s", s.Kind, s.StartRevision, s.EndRevision, s.CreatedOn.Unix(), s.Compression.Suffix())
	if s.Final {
		name += finalSuffix
	}
	return name
}

// Key is the object's key below the store prefix.
func (s Snapshot) Key() string { return Dir + s.Name() }

func (s Snapshot) String() string { return s.Name() }

// Parse reads a key (or a base name) written by Key or by etcd-backup-restore. Anything else is
// an error, so foreign objects in the same prefix are never taken for snapshots: among them the
// parts of etcd-backup-restore's chunked uploads (v2/Full-…/<n>), whose base name is a number.
func Parse(key string) (Snapshot, error) {
	name := key[strings.LastIndex(key, "/")+1:]
	parts := strings.Split(name, "-")
	if len(parts) != 4 {
		return Snapshot{}, fmt.Errorf("%q is not a snapshot name (Kind-startRev-endRev-unixTime[.compression][.final])", key)
	}
	unixPart, final := strings.CutSuffix(parts[3], finalSuffix)
	compression := CompressionNone
	if i := strings.IndexByte(unixPart, '.'); i >= 0 {
		c, ok := compressionOfSuffix(unixPart[i:])
		if !ok {
			return Snapshot{}, fmt.Errorf("%q: suffix %q is none of .gz, .Z, .zlib, .final", key, unixPart[i:])
		}
		unixPart, compression = unixPart[:i], c
	}
	kind := Kind(parts[0])
	if kind != KindFull && kind != KindDelta {
		return Snapshot{}, fmt.Errorf("%q: kind %q is neither %s nor %s", key, parts[0], KindFull, KindDelta)
	}
	start, err1 := strconv.ParseInt(parts[1], 10, 64)
	end, err2 := strconv.ParseInt(parts[2], 10, 64)
	unix, err3 := strconv.ParseInt(unixPart, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || start < 0 || end < 0 || unix < 0 {
		return Snapshot{}, fmt.Errorf("%q: revisions and time must be non-negative integers", key)
	}
	switch {
	case kind == KindFull && start != 0:
		return Snapshot{}, fmt.Errorf("%q: a full snapshot starts at revision 0, not %d", key, start)
	case kind == KindDelta && (start < 1 || end < start):
		return Snapshot{}, fmt.Errorf("%q: a delta holds revisions start..end with 1 <= start <= end, not %d..%d", key, start, end)
	}
	if final && kind != KindFull {
		return Snapshot{}, fmt.Errorf("%q: only a full snapshot is final", key)
	}
	return Snapshot{Kind: kind, StartRevision: start, EndRevision: end, CreatedOn: time.Unix(unix, 0).UTC(),
		Compression: compression, Final: final}, nil
}

// ParseAll parses the keys that are snapshots and returns the others apart, for a caller that
// wants to say what it ignored.
func ParseAll(keys []string) (snaps []Snapshot, foreign []string) {
	for _, k := range keys {
		s, err := Parse(k)
		if err != nil {
			foreign = append(foreign, k)
			continue
		}
		snaps = append(snaps, s)
	}
	return snaps, foreign
}
