package restore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/snapshot"
)

// restoreAndCompare restores chain into a new data dir, starts etcd on it and compares every key
// with the source at the chain's end.
func restoreAndCompare(ctx context.Context, t *testing.T, src *source, chain snapshot.Chain, o Options) Result {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "new.etcd")
	peer := loopbackPeerURL(t)
	o.Chain, o.Open, o.DataDir, o.Name, o.PeerURL, o.Token, o.Log = chain, src.open, dir, "etcd-0", peer, "restored", testr.New(t)
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
	d := src.delta(ctx, t, full.EndRevision+1, end)
	res := restoreAndCompare(ctx, t, src, snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d}}, Options{})
	if res.EventsApplied < 2*events {
		t.Errorf("replayed %d events, want at least the %d puts and %d deletions", res.EventsApplied, events, events)
	}
}
