package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// MetaDir is the folder below the store prefix that holds what etcd-conductor records beside
// the snapshots. It is outside Dir so that etcd-backup-restore, which reads Dir, never meets
// a name it does not know.
const MetaDir = "etcd-conductor/"

// FullMetaFormat names the layout of a full snapshot's record.
const FullMetaFormat = "etcd-conductor.io/full-snapshot-meta/v1"

// FullMeta is recorded beside a full snapshot (a database file has no room for it): who wrote it
// and the keyspace at its revision, where the deltas that continue it start counting from.
type FullMeta struct {
	Format string  `json:"format"`
	Origin Origin  `json:"origin"`
	Digest *Digest `json:"digest,omitempty"`
}

// FullMetaKey is the key of full snapshot s's record.
func FullMetaKey(s Snapshot) string { return MetaDir + "full/" + s.Name() + ".json" }

// FullOfMetaKey is the full snapshot a record key belongs to; ok is false for other keys.
func FullOfMetaKey(key string) (Snapshot, bool) {
	name, ok := strings.CutPrefix(key, MetaDir+"full/")
	if !ok {
		return Snapshot{}, false
	}
	name, ok = strings.CutSuffix(name, ".json")
	if !ok {
		return Snapshot{}, false
	}
	s, err := Parse(name)
	if err != nil || s.Kind != KindFull {
		return Snapshot{}, false
	}
	return s, true
}

// EncodeFullMeta is m's content, with its format set.
func EncodeFullMeta(m FullMeta) []byte {
	m.Format = FullMetaFormat
	b, _ := json.Marshal(m) // plain strings and integers: cannot fail
	return b
}

// DecodeFullMeta reads a full snapshot's record.
func DecodeFullMeta(r io.Reader) (FullMeta, error) {
	var m FullMeta
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return FullMeta{}, fmt.Errorf("decode full snapshot record: %w", err)
	}
	if m.Format != FullMetaFormat {
		return FullMeta{}, fmt.Errorf("full snapshot record format %q, want %q", m.Format, FullMetaFormat)
	}
	return m, nil
}

// OwnerKey holds the Etcd that owns the store's prefix: the first to back up there. Another Etcd
// finding it neither writes, deletes nor restores there.
const OwnerKey = MetaDir + "owner.json"

// Owner is the content of OwnerKey.
type Owner struct {
	// Etcd is namespace/name; EtcdUID the UID of the Etcd that claimed the prefix (an Etcd
	// recreated under the same name, to restore its backups, takes the claim over).
	Etcd    string `json:"etcd"`
	EtcdUID string `json:"etcdUID,omitempty"`
}

// EncodeOwner is o's content.
func EncodeOwner(o Owner) []byte {
	b, _ := json.Marshal(o)
	return b
}

// DecodeOwner reads OwnerKey's content.
func DecodeOwner(b []byte) (Owner, error) {
	var o Owner
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&o); err != nil || o.Etcd == "" {
		return Owner{}, fmt.Errorf("store owner record %q is not {\"etcd\": \"namespace/name\"}", b)
	}
	return o, nil
}
