package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// restoreAndCompare restores chain into a new data dir, starts etcd on it and compares every key
// with the source at the chain's end.
func restoreAndCompare(ctx context.Context, t *testing.T, src *source, chain snapshot.Chain, o Options) Result {
	t.Helper()
	return restoreAndCompareWith(ctx, t, src, chain, o, src.open)
}

// restoreAndCompareWith reads the objects through open.
func restoreAndCompareWith(ctx context.Context, t *testing.T, src *source, chain snapshot.Chain, o Options, open func(context.Context, string) (io.ReadCloser, error)) Result {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "new.etcd")
	peer := loopbackPeerURL(t)
	o.Chain, o.Open, o.DataDir, o.Name, o.PeerURL, o.Token, o.Log = chain, open, dir, "etcd-0", peer, "restored", testr.New(t)
	res, err := Restore(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored: %s", res)
	if res.Stopped != "" || res.Revision != chain.EndRevision() {
		t.Fatalf("restore stopped at revision %d of %d: %s", res.Revision, chain.EndRevision(), res.Stopped)
	}
	got, rev, _ := startRestored(ctx, t, dir, "etcd-0", peer)
	if rev != chain.EndRevision() {
		t.Errorf("restored member serves revision %d, want the source's %d", rev, chain.EndRevision())
	}
	sameKeys(t, got, src.keysAt(ctx, t, chain.EndRevision()))
	return res
}

// TestRestoreLeaseOutlivesASlowReplay: keys of a lease the full snapshot holds stay while the
// replay runs longer than the lease's TTL. A replay that serves the data lets the lease expire
// mid-replay: its keys vanish and the revisions that removes them shift every later source
// revision, which was then taken as applied and skipped.
func TestRestoreLeaseOutlivesASlowReplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := startSource(t)
	lc := clientv3.NewLeaseFromLeaseClient(src.leaseClient(), nil, time.Second)
	defer lc.Close()
	const ttl = 3
	grant, err := lc.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	alive, err := lc.KeepAlive(ctx, grant.ID) // the source keeps it; the restore must too
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range alive {
		}
	}()
	for i := range 20 {
		if _, err := src.kv.Put(ctx, fmt.Sprintf("master-lease/%02d", i), "endpoint", clientv3.WithLease(grant.ID)); err != nil {
			t.Fatal(err)
		}
	}
	full := src.full(ctx, t)
	end := src.write(ctx, t, "after", 40)
	d := src.delta(ctx, t, full.EndRevision+1, end)

	replayed := 0
	slow := func(int64) { replayed++; time.Sleep(200 * time.Millisecond) } // 40+ revisions: past the TTL
	start := time.Now()
	restoreAndCompare(ctx, t, src, snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d}}, Options{afterRevision: slow})
	if took := time.Since(start); took < 2*ttl*time.Second {
		t.Errorf("the replay took %s over %d revisions, not long enough to outlive the %ds lease: the test proves nothing", took, replayed, ttl)
	}
}

// TestRestoreHasNoServerLimits: a source revision holds whatever the source allowed — 5,000
// deletions from one lease revocation, a value over etcd's default request size — and the
// replayed database may exceed a quota; none of it keeps a restore from finishing. (A replay
// through an etcd server refused the first two for ever: "too many operations in txn request",
// "request is too large"; the third failed once the server's quota was scaled down to the test's.)
func TestRestoreHasNoServerLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src := startSourceWith(t, etcdtest.Config{Members: 1, ExtraArgs: []string{"--max-txn-ops=6000", "--max-request-bytes=4194304"}})
	full := src.full(ctx, t)

	lc := clientv3.NewLeaseFromLeaseClient(src.leaseClient(), nil, time.Second)
	defer lc.Close()
	grant, err := lc.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	const events = 5000
	for i := 0; i < events; i += 500 {
		var ops []clientv3.Op
		for j := i; j < i+500; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("events/%05d", j), "an event", clientv3.WithLease(grant.ID)))
		}
		if _, err := src.kv.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lc.Revoke(ctx, grant.ID); err != nil { // one revision deleting 5,000 keys
		t.Fatal(err)
	}
	big := strings.Repeat("b", 2<<20)
	if _, err := src.kv.Put(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	// Data past a quota: 24 MiB of values the replay writes.
	fill := strings.Repeat("q", 64<<10)
	for i := 0; i < 384; i += 16 {
		var ops []clientv3.Op
		for j := i; j < i+16; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("quota/%04d", j), fill))
		}
		if _, err := src.kv.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	end := src.revision(ctx, t)
	ds := src.deltas(ctx, t, full.EndRevision+1, end) // 26 MiB: more than one delta holds
	if len(ds) < 2 {
		t.Errorf("%d deltas for 26 MiB of changes, want them split (backup.MaxDeltaBytes)", len(ds))
	}
	res := restoreAndCompare(ctx, t, src, snapshot.Chain{Full: full, Deltas: ds}, Options{})
	if res.EventsApplied < 2*events {
		t.Errorf("replayed %d events, want at least the %d puts and %d deletions", res.EventsApplied, events, events)
	}
}

// TestRestoreRefusesAKeyspaceTheChainDoesNotDescribe: a delta whose events do not make the
// keyspace its writer recorded is an error, and nothing is left for a member to start from:
// against the writer's digest, one put of a transaction is missing (the revision still lands);
// against the key count (a delta that records no digest), a put that created its key says it
// updated one.
func TestRestoreRefusesAKeyspaceTheChainDoesNotDescribe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := startSource(t)
	src.write(ctx, t, "before", 20)
	full := src.full(ctx, t)
	end := src.write(ctx, t, "after", 20) // ends with a transaction of three changes
	f, _, err := backup.BuildDelta(ctx, src.member, full.EndRevision+1, end, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var dropped, misversioned []snapshot.Event
	for _, e := range f.Events {
		if string(e.Key) != "after/txn-b" {
			dropped = append(dropped, e)
		} else {
			e.Version = 2
		}
		misversioned = append(misversioned, e)
	}
	for _, tc := range []struct {
		name   string
		digest bool
	}{{"against the writer's digest", true}, {"against the key count, without a digest", false}} {
		t.Run(tc.name, func(t *testing.T) {
			g := f
			g.Events = dropped
			if !tc.digest {
				g.Events, g.End = misversioned, nil
			}
			d := src.put(t, snapshot.Delta(full.EndRevision+1, end, time.Now()), g)
			dir := filepath.Join(t.TempDir(), "new.etcd")
			_, err := Restore(ctx, Options{Chain: snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d}}, Open: src.open, DataDir: dir,
				Name: "etcd-0", PeerURL: loopbackPeerURL(t), Token: "t", Log: testr.New(t)})
			var mismatch *MismatchError
			if !errors.As(err, &mismatch) {
				t.Fatalf("restore error %v, want a MismatchError", err)
			}
			t.Logf("refused: %v", err)
			if _, err := os.Stat(filepath.Join(dir, "member")); !os.IsNotExist(err) {
				t.Errorf("a member directory was left after the refusal: %v", err)
			}
		})
	}
}

// TestRestoreRetriesTransientReads: a store read that fails twice (the stream cut mid-object)
// is tried again and the chain restores whole; before, the first failure ended the chain.
func TestRestoreRetriesTransientReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := startSource(t)
	src.write(ctx, t, "before", 20)
	full := src.full(ctx, t)
	mid := src.write(ctx, t, "one", 20)
	d1 := src.delta(ctx, t, full.EndRevision+1, mid)
	end := src.write(ctx, t, "two", 20)
	d2 := src.delta(ctx, t, mid+1, end)
	failures := map[string]int{d1.Key(): 2, full.Key(): 1}
	flaky := func(ctx context.Context, key string) (io.ReadCloser, error) {
		r, err := src.open(ctx, key)
		if err != nil || failures[key] == 0 {
			return r, err
		}
		failures[key]--
		return io.NopCloser(io.MultiReader(io.LimitReader(r, 10), errReader{io.ErrUnexpectedEOF})), nil
	}
	o := Options{Retry: Retry{Attempts: 3, First: 10 * time.Millisecond, Max: 20 * time.Millisecond}}
	chain := snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d1, d2}}
	res := restoreAndCompareWith(ctx, t, src, chain, o, flaky)
	if res.DeltasApplied != 2 {
		t.Errorf("applied %d deltas, want 2", res.DeltasApplied)
	}

	// A store that keeps failing (throttling, an outage longer than the retries) proves nothing
	// about the delta: stopping there started the member without every later delta, acknowledged
	// writes lost for good. The restore fails, leaves nothing, and the next attempt restores all.
	t.Run("a read that keeps failing is an error, never an early stop", func(t *testing.T) {
		failures = map[string]int{d2.Key(): 10}
		dir := filepath.Join(t.TempDir(), "new.etcd")
		res, err := Restore(ctx, Options{Chain: chain, Open: flaky, DataDir: dir, Name: "etcd-0", PeerURL: loopbackPeerURL(t), Token: "t",
			Log: testr.New(t), Retry: o.Retry})
		if err == nil {
			t.Fatalf("restored %s during the outage; want an error", res)
		}
		if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
			t.Errorf("the failed restore left %s: %v", dir, statErr)
		}
		failures = map[string]int{} // the store is back
		if res := restoreAndCompareWith(ctx, t, src, chain, o, flaky); res.DeltasApplied != 2 {
			t.Errorf("after the outage applied %d deltas, want 2", res.DeltasApplied)
		}
	})

	t.Run("a delta read whole with a wrong checksum stops at the last good revision and says what is missing", func(t *testing.T) {
		damagedOpen := func(ctx context.Context, key string) (io.ReadCloser, error) {
			if key == d2.Key() {
				return nil, &backupstore.VerifyError{Key: key, What: "sha256", Want: "ab12", Have: "cd34"}
			}
			return src.open(ctx, key)
		}
		res, err := Restore(ctx, Options{Chain: chain, Open: damagedOpen, DataDir: filepath.Join(t.TempDir(), "new.etcd"), Name: "etcd-0", PeerURL: loopbackPeerURL(t), Token: "t",
			Log: testr.New(t), Retry: o.Retry})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("revisions %d..%d are not restored", mid+1, end)
		if res.Revision != mid || !strings.Contains(res.Stopped, want) {
			t.Errorf("restored to %d, stopped %q; want revision %d and %q", res.Revision, res.Stopped, mid, want)
		}
	})

	t.Run("a full snapshot the store keeps failing to send is no reason to fall back to an older one", func(t *testing.T) {
		failures = map[string]int{full.Key(): 10}
		_, err := Restore(ctx, Options{Chain: chain, Open: flaky, DataDir: filepath.Join(t.TempDir(), "new.etcd"), Name: "etcd-0",
			PeerURL: loopbackPeerURL(t), Token: "t", Log: testr.New(t), Retry: o.Retry})
		var bad *FullSnapshotError
		if err == nil || errors.As(err, &bad) {
			t.Fatalf("restore error %v; want a failed read, not a FullSnapshotError (which falls back)", err)
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestRestoreNeverChainsTwoClusters: a delta another etcd cluster wrote (a restored cluster
// reusing the revisions of the one it replaced) is not replayed onto this cluster's chain.
func TestRestoreNeverChainsTwoClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := startSource(t)
	full := src.full(ctx, t)
	mid := src.write(ctx, t, "one", 10)
	d1 := src.delta(ctx, t, full.EndRevision+1, mid)
	end := src.write(ctx, t, "two", 10)
	f, _, err := backup.BuildDelta(ctx, src.member, mid+1, end, nil, &snapshot.Origin{ClusterID: "another"})
	if err != nil {
		t.Fatal(err)
	}
	d2 := src.put(t, snapshot.Delta(mid+1, end, time.Now()), f)
	res, err := Restore(ctx, Options{Chain: snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d1, d2}}, Open: src.open,
		DataDir: filepath.Join(t.TempDir(), "new.etcd"), Name: "etcd-0", PeerURL: loopbackPeerURL(t), Token: "t", Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != mid || !strings.Contains(res.Stopped, "another") {
		t.Errorf("restored to revision %d (stopped %q); want %d, stopped at the other cluster's delta", res.Revision, res.Stopped, mid)
	}
}

// TestRestoreFallsBackFromACorruptFullSnapshot: the latest full snapshot is corrupt (stored as
// it was uploaded: the store's own checksum is no help); the restore takes the one before and the
// deltas that continue it, to the same end, and says it fell back.
func TestRestoreFallsBackFromACorruptFullSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := startSource(t)
	src.write(ctx, t, "before", 20)
	full1 := src.full(ctx, t)
	mid := src.write(ctx, t, "one", 20)
	d1 := src.delta(ctx, t, full1.EndRevision+1, mid)
	full2 := src.full(ctx, t)
	end := src.write(ctx, t, "two", 20)
	d2 := src.delta(ctx, t, mid+1, end)

	for _, tc := range []struct {
		name    string
		corrupt func([]byte) []byte
	}{
		{"a flipped byte", func(b []byte) []byte { b = bytes.Clone(b); b[len(b)/2] ^= 0xff; return b }},
		{"cut short", func(b []byte) []byte { return b[:16<<10] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := backupstore.NewLocal(t.TempDir(), "backups", "etcd-main")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []snapshot.Snapshot{full1, d1, full2, d2} {
				data := src.objects[s.Key()]
				if s == full2 {
					data = tc.corrupt(data)
				}
				if _, err := store.Put(ctx, s.Key(), bytes.NewReader(data), int64(len(data)), backupstore.SHA256Hex(data)); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(t.TempDir(), "new.etcd")
			peer := loopbackPeerURL(t)
			res, err := FromStore(ctx, store, snapshot.Owner{}, Options{DataDir: dir, Name: "etcd-0", PeerURL: peer, Token: "t", Log: testr.New(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("restored: %s", res)
			if res.Full != full1.Name() || len(res.FellBack) != 1 || !strings.Contains(res.FellBack[0], full2.Name()) || res.Revision != end {
				t.Fatalf("restored %s; want %s and its deltas to revision %d, having fallen back from %s", res, full1.Name(), end, full2.Name())
			}
			got, _, _ := startRestored(ctx, t, dir, "etcd-0", peer)
			sameKeys(t, got, src.keysAt(ctx, t, end))
		})
	}
}

// TestRestoreRefusesAnotherEtcdsStore: a prefix another Etcd claimed is never restored from.
func TestRestoreRefusesAnotherEtcdsStore(t *testing.T) {
	ctx := context.Background()
	store, err := backupstore.NewLocal(t.TempDir(), "backups", "shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Claim(ctx, store, snapshot.Owner{Etcd: "team-a/etcd-main", EtcdUID: "1"}, true); err != nil {
		t.Fatal(err)
	}
	_, err = FromStore(ctx, store, snapshot.Owner{Etcd: "team-b/etcd-main", EtcdUID: "2"}, Options{DataDir: filepath.Join(t.TempDir(), "d"), Log: testr.New(t)})
	var shared *backup.SharedError
	if !errors.As(err, &shared) || shared.Owner.Etcd != "team-a/etcd-main" {
		t.Fatalf("error %v, want a SharedError naming team-a/etcd-main", err)
	}
}

// TestRestoreShortOfSpaceSaysSo: a data volume too small for the database and etcd's copy of it
// is refused with the numbers before anything is written there (a tmpfs of 24 MiB against a
// 20 MiB database; needs the right to mount, as the node simulator's tests do).
func TestRestoreShortOfSpaceSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	vol := t.TempDir()
	if err := syscall.Mount("tmpfs", vol, "tmpfs", 0, "size=24m"); err != nil {
		t.Skipf("cannot mount a small volume: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(vol, syscall.MNT_DETACH) })
	src := startSource(t)
	value := strings.Repeat("v", 64<<10)
	for i := range 320 { // 20 MiB of values
		if _, err := src.kv.Put(ctx, fmt.Sprintf("big/%04d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	full := src.full(ctx, t)
	dir := filepath.Join(vol, "new.etcd")
	_, err := Restore(ctx, Options{Chain: snapshot.Chain{Full: full}, Open: src.open, DataDir: dir, Name: "etcd-0",
		PeerURL: loopbackPeerURL(t), Token: "t", Log: testr.New(t)})
	var short *InsufficientSpaceError
	if !errors.As(err, &short) {
		t.Fatalf("restore onto a 24 MiB volume: %v, want an InsufficientSpaceError", err)
	}
	t.Logf("refused: %v", err)
	entries, _ := os.ReadDir(vol)
	if len(entries) > 0 {
		t.Errorf("left on the volume after the refusal: %v", entries)
	}
}

// TestDeltaEventsAreBounded: the events a delta is built from stop at the end of the revision
// in which they pass the bound (values and old values counted), so an agent's memory holds about
// the bound however much was written in one period; the rest is the next delta's.
func TestDeltaEventsAreBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := startSource(t)
	from := src.revision(ctx, t) + 1
	value := strings.Repeat("m", 1<<20)
	for i := range 6 { // six revisions of 1 MiB (two puts of 512 KiB each)
		if _, err := src.kv.Txn(ctx).Then(clientv3.OpPut(fmt.Sprintf("a/%d", i), value[:1<<19]), clientv3.OpPut(fmt.Sprintf("b/%d", i), value[:1<<19])).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	to := src.revision(ctx, t)
	events, err := src.member.Events(ctx, from, to, 5<<19) // 2.5 MiB
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1].ModRevision
	if last != from+2 || len(events) != 6 {
		t.Errorf("got %d events up to revision %d, want the 6 of revisions %d..%d (the bound passed within the third)", len(events), last, from, from+2)
	}
	all, err := src.member.Events(ctx, from, to, 0)
	if err != nil || len(all) != 12 {
		t.Errorf("unbounded: %d events, %v; want 12", len(all), err)
	}
}
