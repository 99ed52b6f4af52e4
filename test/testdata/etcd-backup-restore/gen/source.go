package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
)

// source is the one-member etcd (mTLS, loopback) whose history the fixtures back up.
type source struct {
	kv    clientv3.KV
	watch clientv3.Watcher
	lease clientv3.Lease
	maint pb.MaintenanceClient
}

func startSource(h *harness) (*source, error) {
	c := etcdtest.Start(h, etcdtest.Config{Members: 1})
	cc, err := c.Dial(0)
	if err != nil {
		return nil, err
	}
	w := clientv3.NewWatchFromWatchClient(pb.NewWatchClient(cc), nil)
	h.Cleanup(func() { _ = w.Close() })
	return &source{
		kv: clientv3.NewKVFromKVClient(pb.NewKVClient(cc), nil), watch: w,
		lease: clientv3.NewLeaseFromLeaseClient(pb.NewLeaseClient(cc), nil, 0),
		maint: pb.NewMaintenanceClient(cc),
	}, nil
}

// revision is the member's current revision, read as etcd-backup-restore reads it before a full
// snapshot (a Get of the header only).
func (s *source) revision(ctx context.Context) (int64, error) {
	resp, err := s.kv.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read the revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// snapshot is the whole Maintenance.Snapshot stream: the database and etcd's SHA-256 trailer.
func (s *source) snapshot(ctx context.Context) ([]byte, error) {
	stream, err := s.maint.Snapshot(ctx, &pb.SnapshotRequest{})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var data []byte
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot stream: %w", err)
		}
		data = append(data, chunk.Blob...)
	}
}

// events are the watch events of revisions from..to, from a watch on every key as
// etcd-backup-restore opens it (key "", WithPrefix, WithRev).
func (s *source) events(ctx context.Context, from, to int64) ([]*clientv3.Event, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []*clientv3.Event
	for resp := range s.watch.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			return nil, fmt.Errorf("watch from %d: %w", from, err)
		}
		for _, e := range resp.Events {
			if e.Kv.ModRevision > to {
				return nil, fmt.Errorf("watch from %d: revision %d passed %d", from, e.Kv.ModRevision, to)
			}
			out = append(out, e)
		}
		// etcd sends the events of one revision in one response.
		if n := len(out); n > 0 && out[n-1].Kv.ModRevision == to {
			return out, nil
		}
	}
	return nil, fmt.Errorf("watch from %d ended before revision %d: %w", from, to, ctx.Err())
}

// keyspace is every key and value at revision rev.
func (s *source) keyspace(ctx context.Context, rev int64) (map[string]string, error) {
	resp, err := s.kv.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(rev))
	if err != nil {
		return nil, fmt.Errorf("read the keyspace at %d: %w", rev, err)
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out, nil
}
