package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// fakeMember serves a fixed snapshot stream at a fixed revision.
type fakeMember struct {
	rev  int64
	data []byte
}

func (m fakeMember) Status(context.Context) (etcdclient.MemberStatus, error) {
	return etcdclient.MemberStatus{}, errors.New("not used")
}
func (m fakeMember) Revision(context.Context) (int64, error) { return m.rev, nil }
func (m fakeMember) Snapshot(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(m.data)), nil
}
func (m fakeMember) Events(context.Context, int64, int64, int64) ([]snapshot.Event, error) {
	return nil, errors.New("not used")
}
func (m fakeMember) KeyspaceDigest(context.Context, int64) (snapshot.Digest, error) {
	return snapshot.Digest{}, errors.New("not used")
}

var at = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// stored reads an object back whole, and its content through its compression.
func stored(t *testing.T, store backupstore.Store, s snapshot.Snapshot) (raw, content []byte) {
	t.Helper()
	r, err := store.Get(context.Background(), s.Key())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	raw, err = io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := snapshot.Decompress(bytes.NewReader(raw), s.Compression)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	content, err = io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw, content
}

func TestUploadFullCompresses(t *testing.T) {
	db := bytes.Repeat([]byte("a bbolt page, more or less "), 20_000)
	for _, c := range snapshot.Compressions() {
		t.Run(c.String(), func(t *testing.T) {
			ctx := context.Background()
			store, err := backupstore.NewLocal(t.TempDir(), "bucket", "etcd")
			if err != nil {
				t.Fatal(err)
			}
			snap, obj, err := UploadFull(ctx, fakeMember{rev: 42, data: db}, store, t.TempDir(), at, c)
			if err != nil {
				t.Fatal(err)
			}
			if want := "v2/Full-00000000-00000042-" + "1795694400" + c.Suffix(); obj.Key != want || snap.Key() != want {
				t.Fatalf("uploaded as %s (snapshot %s), want %s", obj.Key, snap.Key(), want)
			}
			if parsed, err := snapshot.Parse(obj.Key); err != nil || parsed != snap {
				t.Fatalf("the key parses as %+v (%v), want %+v", parsed, err, snap)
			}
			raw, content := stored(t, store, snap)
			sum := sha256.Sum256(raw)
			if obj.Size != int64(len(raw)) || obj.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("object size %d sha %s; the stored bytes are %d, %x (the compressed ones must be verified)", obj.Size, obj.SHA256, len(raw), sum)
			}
			if c != snapshot.CompressionNone && len(raw) >= len(db) {
				t.Errorf("%s stored %d bytes of a %d-byte database", c, len(raw), len(db))
			}
			if !bytes.Equal(content, db) {
				t.Errorf("read back %d bytes, not the %d of the snapshot stream", len(content), len(db))
			}
		})
	}
}

func TestUploadDeltaCompresses(t *testing.T) {
	events := []snapshot.Event{
		{Type: snapshot.EventPut, Key: []byte("k"), Value: []byte(strings.Repeat("v", 1000)), CreateRevision: 43, ModRevision: 43, Version: 1},
		{Type: snapshot.EventDelete, Key: []byte("k"), ModRevision: 44},
	}
	for _, c := range snapshot.Compressions() {
		t.Run(c.String(), func(t *testing.T) {
			ctx := context.Background()
			store, err := backupstore.NewLocal(t.TempDir(), "bucket", "etcd")
			if err != nil {
				t.Fatal(err)
			}
			snap, obj, err := UploadDelta(ctx, store, snapshot.DeltaFile{StartRevision: 43, EndRevision: 44, Events: events}, at, c)
			if err != nil {
				t.Fatal(err)
			}
			if want := "v2/Incr-00000043-00000044-1795694400" + c.Suffix(); obj.Key != want {
				t.Fatalf("uploaded as %s, want %s", obj.Key, want)
			}
			_, content := stored(t, store, snap)
			f, err := snapshot.ReadDelta(bytes.NewReader(content))
			if err != nil {
				t.Fatal(err)
			}
			if f.StartRevision != 43 || f.EndRevision != 44 || len(f.Events) != 2 || len(f.Events[0].Value) != 1000 {
				t.Fatalf("read back %+v", f)
			}
		})
	}
	t.Run("events outside the range are an encoding error", func(t *testing.T) {
		store, err := backupstore.NewLocal(t.TempDir(), "bucket", "etcd")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := UploadDelta(context.Background(), store, snapshot.DeltaFile{StartRevision: 43, EndRevision: 43, Events: events}, at, snapshot.CompressionGzip); !errors.Is(err, errEncode) {
			t.Fatalf("error %v, want errEncode", err)
		}
	})
}
