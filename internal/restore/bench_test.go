package restore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-conductor/etcd-conductor/internal/snapshot"
)

// fill writes about mb MiB of 4 KiB values, 64 keys a transaction.
func (s *source) fill(ctx context.Context, b *testing.B, prefix string, mb int) {
	value := strings.Repeat("v", 4096)
	n := mb * 256
	for i := 0; i < n; i += 64 {
		var ops []clientv3.Op
		for j := i; j < i+64 && j < n; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s/%08d", prefix, j), value))
		}
		if _, err := s.kv.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRestore measures restore throughput against the keyspace size: a full snapshot of
// 4, 16 and 64 MiB of values restored into a data dir (MB/s over the snapshot's size), and the
// same with 2000 events in one delta replayed on top.
func BenchmarkRestore(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, mb := range []int{4, 16, 64} {
		src := startSourceTB(b)
		src.fill(ctx, b, "bench", mb)
		full := src.full(ctx, b)
		size := int64(len(src.objects[full.Key()]))
		for _, withDelta := range []bool{false, true} {
			chain := snapshot.Chain{Full: full}
			name := fmt.Sprintf("keyspace=%dMiB/full", mb)
			if withDelta {
				end := full.EndRevision
				for i := range 2000 {
					resp, err := src.kv.Put(ctx, fmt.Sprintf("delta/%06d", i), "x")
					if err != nil {
						b.Fatal(err)
					}
					end = resp.Header.Revision
				}
				chain.Deltas = []snapshot.Snapshot{src.delta(ctx, b, full.EndRevision+1, end)}
				name = fmt.Sprintf("keyspace=%dMiB/full+2000-event-delta", mb)
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(size)
				for i := 0; i < b.N; i++ {
					dir := filepath.Join(b.TempDir(), "new.etcd")
					if _, err := Restore(ctx, Options{Chain: chain, Open: src.open, DataDir: dir, Name: "etcd-0", PeerURL: loopbackPeerURL(b), Token: "bench"}); err != nil {
						b.Fatal(err)
					}
				}
				if withDelta {
					b.ReportMetric(float64(2000*b.N)/b.Elapsed().Seconds(), "events/s")
				}
			})
		}
	}
}
