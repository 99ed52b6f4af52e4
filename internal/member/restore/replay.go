package restore

import (
	"context"
	"fmt"
	"time"

	"github.com/coreos/go-semver/semver"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
)

// unknownLeaseTTL is given to a lease a replayed key is attached to that the full snapshot does
// not hold (it was granted after the snapshot; grants are not in a delta). The lease keeps its
// ID, so the key is byte for byte the source's and a client still renewing it finds it; nobody
// renewing it, it ends an hour after the member starts, as etcd's own leases restart their TTL
// when a leader is elected.
const unknownLeaseTTL = int64(time.Hour / time.Second)

// replayer applies deltas to a database file through etcd's own storage layer (mvcc over the
// bbolt backend), not through a server: each source revision becomes exactly one revision here,
// so the store's revision is the source's after every step and a skipped or repeated revision
// is seen at once. No server means no request or transaction size limit, no quota, and no lessor
// that expires or revokes anything while the replay runs (the lessor here is never promoted).
type replayer struct {
	be backend.Backend
	le lease.Lessor
	kv mvcc.KV
}

func openReplayer(dbPath string) *replayer {
	lg := zap.NewNop()
	cfg := backend.DefaultBackendConfig(lg)
	cfg.Path = dbPath
	// Scratch until the restore is done; a restore that dies starts again from the store.
	cfg.UnsafeNoFsync = true
	be := backend.New(cfg)
	le := lease.NewLessor(lg, be, noCluster{}, lease.LessorConfig{MinLeaseTTL: 1})
	return &replayer{be: be, le: le, kv: mvcc.NewStore(lg, be, le, mvcc.StoreConfig{})}
}

// noCluster answers the lessor's cluster version question; it is only asked for checkpoints,
// which a lessor that never leads never takes.
type noCluster struct{}

func (noCluster) Version() *semver.Version { return nil }

func (r *replayer) rev() int64 { return r.kv.Rev() }

func (r *replayer) close() error {
	r.kv.Commit()
	r.le.Stop()
	err := r.kv.Close()
	if cerr := r.be.Close(); err == nil {
		err = cerr
	}
	return err
}

// revisionError says a source revision did not land as that revision.
type revisionError struct {
	rev, reached int64
	events       int
}

func (e *revisionError) Error() string {
	return fmt.Sprintf("source revision %d (%d events) left the restored data at revision %d: the delta does not continue what was restored", e.rev, e.events, e.reached)
}

// applier replays a stream of events onto the store, one write transaction per source revision
// (the events of one revision are all it holds): events at or below the store's revision (in the
// full snapshot, or an overlapping delta) are passed over; a gap stops it before anything of the
// revision after the gap is written; a revision that does not land as itself is an error the
// caller ends the restore on (the scratch database is then discarded).
type applier struct {
	r       *replayer
	tally   *tally
	after   func(rev int64)
	pending []snapshot.Event
	applied int
}

func (r *replayer) applier(t *tally, after func(rev int64)) *applier {
	return &applier{r: r, tally: t, after: after}
}

// feed takes the next event, writing the revision before it once it is complete.
func (a *applier) feed(ctx context.Context, e snapshot.Event) error {
	if n := len(a.pending); n > 0 && a.pending[n-1].ModRevision != e.ModRevision {
		if err := a.flush(ctx); err != nil {
			return err
		}
	}
	a.pending = append(a.pending, e)
	return nil
}

// flush writes the revision held, if any.
func (a *applier) flush(ctx context.Context) error {
	if len(a.pending) == 0 {
		return nil
	}
	events, rev := a.pending, a.pending[0].ModRevision
	a.pending = a.pending[:0]
	if rev <= a.r.rev() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if want := a.r.rev() + 1; rev != want {
		return &gapError{from: want, to: rev - 1}
	}
	if err := a.r.write(events); err != nil {
		return fmt.Errorf("source revision %d: %w", rev, err)
	}
	if got := a.r.rev(); got != rev {
		return &revisionError{rev: rev, reached: got, events: len(events)}
	}
	a.tally.count(events)
	a.applied += len(events)
	if a.after != nil {
		a.after(rev)
	}
	return nil
}

func (r *replayer) write(events []snapshot.Event) error {
	for _, e := range events {
		if e.Type == snapshot.EventPut && e.Lease != 0 && r.le.Lookup(lease.LeaseID(e.Lease)) == nil {
			if _, err := r.le.Grant(lease.LeaseID(e.Lease), unknownLeaseTTL); err != nil {
				return fmt.Errorf("recreating lease %x: %w", e.Lease, err)
			}
		}
	}
	tw := r.kv.Write(traceutil.TODO())
	defer tw.End()
	for _, e := range events {
		switch e.Type {
		case snapshot.EventPut:
			tw.Put(e.Key, e.Value, lease.LeaseID(e.Lease))
		case snapshot.EventDelete:
			tw.DeleteRange(e.Key, nil)
		}
	}
	return nil
}

// gapError says revisions are missing between what was restored and the next event.
type gapError struct{ from, to int64 }

func (e *gapError) Error() string {
	return fmt.Sprintf("revisions %d..%d are in no delta", e.from, e.to)
}

// digest counts the keys and values the store holds at its revision, a page at a time.
func (r *replayer) digest(ctx context.Context) (snapshot.Digest, error) {
	var acc snapshot.Accumulator
	rev := r.rev()
	key := []byte{0}
	const page = 1000
	for {
		tr := r.kv.Read(mvcc.ConcurrentReadTxMode, traceutil.TODO())
		res, err := tr.Range(ctx, key, []byte{}, mvcc.RangeOptions{Limit: page, Rev: rev})
		tr.End()
		if err != nil {
			return snapshot.Digest{}, fmt.Errorf("reading the restored keys at revision %d: %w", rev, err)
		}
		for _, kv := range res.KVs {
			acc.Add(kv.Key, kv.Value)
		}
		if len(res.KVs) < page {
			return acc.Digest(rev), nil
		}
		last := res.KVs[len(res.KVs)-1].Key
		key = append(append([]byte{}, last...), 0)
	}
}

// count is how many keys the store holds at its revision.
func (r *replayer) count(ctx context.Context) (int64, error) {
	tr := r.kv.Read(mvcc.ConcurrentReadTxMode, traceutil.TODO())
	defer tr.End()
	res, err := tr.Range(ctx, []byte{0}, []byte{}, mvcc.RangeOptions{CountOnly: true})
	if err != nil {
		return 0, fmt.Errorf("counting the restored keys: %w", err)
	}
	return int64(res.Count), nil
}

// tally is what the chain's events say about the keyspace, independently of the store: the
// key count moves by one for each creation and each deletion.
type tally struct {
	created, deleted int64
	// unknownCreates counts puts whose version the delta did not record.
	unknownCreates int
}

func (t *tally) count(events []snapshot.Event) {
	for _, e := range events {
		switch {
		case e.Type == snapshot.EventDelete:
			t.deleted++
		case e.Version == 1:
			t.created++
		case e.Version == 0:
			t.unknownCreates++
		}
	}
}
