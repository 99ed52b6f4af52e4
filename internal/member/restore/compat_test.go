package restore

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// fixtures are chains etcd-backup-restore's format, written by an independent generator from a
// real etcd (test/testdata/etcd-backup-restore/README.md).
const fixtures = "../../../test/testdata/etcd-backup-restore"

// fixtureStore is one fixture directory as a store: its keys below v2/ and a reader of them.
func fixtureStore(t *testing.T, dir string) (keys []string, open func(context.Context, string) (io.ReadCloser, error)) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, snapshot.Dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		keys = append(keys, snapshot.Dir+e.Name())
	}
	return keys, func(_ context.Context, key string) (io.ReadCloser, error) {
		return os.Open(filepath.Join(dir, filepath.FromSlash(key)))
	}
}

type expectedKeyspace struct {
	Revision int64             `json:"revision"`
	Keys     map[string]string `json:"keys"`
}

// TestRestoreBackupRestoreChains restores etcd-backup-restore's chains, one per compression and
// its final full snapshot, and checks the member serves exactly the source's keyspace at the
// chain's end. The chains' full snapshot holds one revision more than its name says, as
// etcd-backup-restore's do under writes, so the first delta repeats an event.
func TestRestoreBackupRestoreChains(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtures, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want expectedKeyspace
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		dir         string
		compression snapshot.Compression
		deltas      int
	}{
		{"none", snapshot.CompressionNone, 3},
		{"gzip", snapshot.CompressionGzip, 3},
		{"lzw", snapshot.CompressionLZW, 3},
		{"zlib", snapshot.CompressionZlib, 3},
		{"final", snapshot.CompressionGzip, 0},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			keys, open := fixtureStore(t, filepath.Join(fixtures, tc.dir))
			snaps, foreign := snapshot.ParseAll(keys)
			if len(foreign) > 0 {
				t.Fatalf("fixture objects not taken for snapshots: %v", foreign)
			}
			chain, ok := snapshot.Latest(snaps)
			if !ok || len(chain.Deltas) != tc.deltas || chain.Gap != "" || chain.EndRevision() != want.Revision {
				t.Fatalf("chain %+v, want %d deltas up to revision %d", chain, tc.deltas, want.Revision)
			}
			for _, s := range append([]snapshot.Snapshot{chain.Full}, chain.Deltas...) {
				if s.Compression != tc.compression {
					t.Fatalf("%s: compression %s, want %s", s.Name(), s.Compression, tc.compression)
				}
			}
			if tc.dir == "final" && !chain.Full.Final {
				t.Fatalf("%s is not read as a final snapshot", chain.Full.Name())
			}
			dir := filepath.Join(t.TempDir(), "new.etcd")
			peer := loopbackPeerURL(t)
			res, err := Restore(ctx, Options{Chain: chain, Open: open, DataDir: dir, Name: "etcd-0", PeerURL: peer, Token: "from-backup-restore", Log: testr.New(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("restored: %s", res)
			if res.Stopped != "" || res.DeltasApplied != tc.deltas || res.Revision != want.Revision {
				t.Fatalf("restored %s; want every delta, revision %d", res, want.Revision)
			}
			got, rev, _ := startRestored(ctx, t, dir, "etcd-0", peer)
			if rev != want.Revision {
				t.Errorf("restored member serves revision %d, want %d", rev, want.Revision)
			}
			sameKeys(t, got, want.Keys)
		})
	}
}

// TestRestoreOwnCompressedChains: a chain the member-agent writes (backup.UploadFull and
// UploadDelta against a Local store) restores exactly with each compression.
func TestRestoreOwnCompressedChains(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src := startSource(t)
	member := src.member
	at := time.Now()
	for _, comp := range snapshot.Compressions() {
		t.Run(comp.String(), func(t *testing.T) {
			store, err := backupstore.NewLocal(t.TempDir(), "backups", "etcd-main")
			if err != nil {
				t.Fatal(err)
			}
			src.write(ctx, t, "full-"+comp.String(), 100)
			full, _, err := backup.UploadFull(ctx, member, store, t.TempDir(), at, comp)
			if err != nil {
				t.Fatal(err)
			}
			prev := full.EndRevision
			for i := range 2 {
				end := src.write(ctx, t, "delta-"+comp.String()+"-"+string(rune('a'+i)), 40)
				f, _, err := backup.BuildDelta(ctx, member, prev+1, end, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := backup.UploadDelta(ctx, store, f, at.Add(time.Duration(i+1)*time.Second), comp); err != nil {
					t.Fatal(err)
				}
				prev = end
			}
			dir := filepath.Join(t.TempDir(), "new.etcd")
			peer := loopbackPeerURL(t)
			res, err := FromStore(ctx, store, snapshot.Owner{}, Options{DataDir: dir, Name: "etcd-0", PeerURL: peer, Token: "t", Log: testr.New(t)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != "" || res.DeltasApplied != 2 || res.Revision != prev {
				t.Fatalf("restored %s; want 2 deltas up to revision %d", res, prev)
			}
			got, rev, _ := startRestored(ctx, t, dir, "etcd-0", peer)
			if rev != prev {
				t.Errorf("restored member serves revision %d, want %d", rev, prev)
			}
			sameKeys(t, got, src.keysAt(ctx, t, prev))
		})
	}
}
