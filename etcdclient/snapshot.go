package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
)

// ErrCompacted says the revisions asked for are gone from the member's history: a delta cannot
// be built, a full snapshot is needed.
var ErrCompacted = errors.New("revision compacted")

// Revision is the member's current revision (a linearizable read, so the leader's).
func (m *MemberConn) Revision(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	resp, err := m.client.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("revision of member %s: %w", m.target.Name, err)
	}
	return resp.Header.GetRevision(), nil
}

// Snapshot streams the member's whole database (Maintenance.Snapshot). The caller closes it;
// ctx bounds the whole transfer.
func (m *MemberConn) Snapshot(ctx context.Context) (io.ReadCloser, error) {
	rc, err := m.client.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot of member %s: %w", m.target.Name, err)
	}
	return rc, nil
}

// Events returns every change of revisions from..to (both included), read with a watch over the
// whole keyspace, in revision order, each with the value its key held before (Event.Prev) when
// it had one. A compacted from yields ErrCompacted. Once the keys and values returned pass
// maxBytes (0: no bound) it stops at the end of a revision: the caller takes the rest later, and
// memory holds about maxBytes whatever was written.
func (m *MemberConn) Events(ctx context.Context, from, to, maxBytes int64) ([]snapshot.Event, error) {
	if to < from {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	var out []snapshot.Event
	var size int64
	wch := m.client.Watch(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from), clientv3.WithPrevKV())
	for resp := range wch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return nil, fmt.Errorf("events %d..%d of member %s (compacted at %d): %w", from, to, m.target.Name, resp.CompactRevision, ErrCompacted)
		}
		if err := resp.Err(); err != nil {
			return nil, fmt.Errorf("events %d..%d of member %s: %w", from, to, m.target.Name, err)
		}
		for _, ev := range resp.Events {
			kv := ev.Kv
			if kv.ModRevision > to {
				return out, nil
			}
			if n := len(out); maxBytes > 0 && size > maxBytes && out[n-1].ModRevision != kv.ModRevision {
				return out, nil // at a revision's end
			}
			e := snapshot.Event{Type: snapshot.EventPut, Key: kv.Key, ModRevision: kv.ModRevision}
			if ev.Type == mvccpb.DELETE {
				e.Type = snapshot.EventDelete
			} else {
				e.Value, e.CreateRevision, e.Version, e.Lease = kv.Value, kv.CreateRevision, kv.Version, kv.Lease
			}
			if ev.PrevKv != nil {
				e.Prev = &snapshot.PrevValue{Value: ev.PrevKv.Value}
				size += int64(len(ev.PrevKv.Value))
			}
			size += int64(len(kv.Key) + len(kv.Value))
			out = append(out, e)
		}
		if n := len(out); n > 0 && out[n-1].ModRevision >= to {
			return out, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("events %d..%d of member %s: %w", from, to, m.target.Name, err)
	}
	return nil, fmt.Errorf("events %d..%d of member %s: watch closed", from, to, m.target.Name)
}

// digestPage is how many keys KeyspaceDigest reads a request.
const digestPage = 500

// KeyspaceDigest counts every key and value the member held at revision rev, a page at a time
// (the member's memory, not this process's, bounds a page). A compacted rev yields ErrCompacted.
func (m *MemberConn) KeyspaceDigest(ctx context.Context, rev int64) (snapshot.Digest, error) {
	return m.keyspaceDigest(ctx, rev)
}

// LocalKeyspaceDigest is KeyspaceDigest of what the member itself holds, read serializably: a
// learner serves that (etcd refuses it HashKV and every linearizable read), so a seeded learner's
// keyspace can be compared with the leader's at one revision before it is promoted.
func (m *MemberConn) LocalKeyspaceDigest(ctx context.Context, rev int64) (snapshot.Digest, error) {
	return m.keyspaceDigest(ctx, rev, clientv3.WithSerializable())
}

func (m *MemberConn) keyspaceDigest(ctx context.Context, rev int64, extra ...clientv3.OpOption) (snapshot.Digest, error) {
	var acc snapshot.Accumulator
	key := "\x00"
	opts := append([]clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithRev(rev), clientv3.WithLimit(digestPage)}, extra...)
	for {
		cctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
		resp, err := m.client.Get(cctx, key, opts...)
		cancel()
		if errors.Is(err, rpctypes.ErrCompacted) {
			return snapshot.Digest{}, fmt.Errorf("keyspace of member %s at revision %d: %w", m.target.Name, rev, ErrCompacted)
		}
		if err != nil {
			return snapshot.Digest{}, fmt.Errorf("keyspace of member %s at revision %d: %w", m.target.Name, rev, err)
		}
		for _, kv := range resp.Kvs {
			acc.Add(kv.Key, kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return acc.Digest(rev), nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
