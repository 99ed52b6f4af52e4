package restore

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// restoreBenchSizesMiB are BenchmarkRestore's keyspace sizes. 1 GiB fills for minutes and needs
// about 10 GB of disk (source, store, restore): benchmarks never run in make test, and each size
// fills inside its own sub-benchmark, so -bench 'Restore/keyspace=64MiB' runs one size alone.
var restoreBenchSizesMiB = []int{64, 256, 1024}

// benchDeltaEvents is the size of the delta replayed on top in the delta variants.
const benchDeltaEvents = 2000

// benchValue is key i's 4 KiB value: half repeated text, half hex of pseudo-random bytes, so
// gzip shrinks the database about 5:1, near what it does to serialised Kubernetes objects (a
// value of one repeated byte would make the compressed case look far better than it is).
func benchValue(i int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	random := make([]byte, 1024)
	for j := range random {
		random[j] = byte(rng.Uint32())
	}
	return strings.Repeat(`{"kind":"Pod","spec":{}}`, 2048/24+1)[:2048] + hex.EncodeToString(random)
}

// fill writes about mb MiB of benchValues, 64 keys a transaction.
func (s *source) fill(ctx context.Context, b *testing.B, prefix string, mb int) {
	n := mb * 256
	for i := 0; i < n; i += 64 {
		var ops []clientv3.Op
		for j := i; j < i+64 && j < n; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s/%08d", prefix, j), benchValue(j)))
		}
		if _, err := s.kv.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchChains is one keyspace backed up by the member-agent's own writer (backup.UploadFull and
// UploadDelta) into one Local store per compression: the full snapshot alone and with a delta.
type benchChains struct {
	dbBytes int64 // the database's size, uncompressed: what MB/s counts
	full    map[snapshot.Compression]snapshot.Chain
	delta   map[snapshot.Compression]snapshot.Chain
	stored  map[snapshot.Compression]int64 // the full snapshot object's size
	stores  map[snapshot.Compression]backupstore.Store
}

func backUp(ctx context.Context, b *testing.B, src *source, member *etcdclient.MemberConn, compressions []snapshot.Compression) benchChains {
	c := benchChains{full: map[snapshot.Compression]snapshot.Chain{}, delta: map[snapshot.Compression]snapshot.Chain{},
		stored: map[snapshot.Compression]int64{}, stores: map[snapshot.Compression]backupstore.Store{}}
	at := time.Now()
	var fullRev int64
	for _, comp := range compressions {
		store, err := backupstore.NewLocal(b.TempDir(), "bench", comp.String())
		if err != nil {
			b.Fatal(err)
		}
		full, obj, err := backup.UploadFull(ctx, member, store, b.TempDir(), at, comp)
		if err != nil {
			b.Fatal(err)
		}
		if comp == snapshot.CompressionNone {
			c.dbBytes = obj.Size
		}
		c.full[comp], c.stored[comp], c.stores[comp], fullRev = snapshot.Chain{Full: full}, obj.Size, store, full.EndRevision
	}
	end := fullRev
	for i := range benchDeltaEvents {
		resp, err := src.kv.Put(ctx, fmt.Sprintf("delta/%06d", i), "x")
		if err != nil {
			b.Fatal(err)
		}
		end = resp.Header.Revision
	}
	f, _, err := backup.BuildDelta(ctx, member, fullRev+1, end, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, comp := range compressions {
		d, _, err := backup.UploadDelta(ctx, c.stores[comp], f, at.Add(time.Second), comp)
		if err != nil {
			b.Fatal(err)
		}
		c.delta[comp] = snapshot.Chain{Full: c.full[comp].Full, Deltas: []snapshot.Snapshot{d}}
	}
	return c
}

// BenchmarkRestore measures restore throughput and disk use against the keyspace size: a full
// snapshot of 64 MiB, 256 MiB and 1 GiB of values, uncompressed and gzip, restored from a Local
// store into a data dir, alone and with a 2000-event delta replayed on top. It reports MB/s of
// the uncompressed database, the stored full snapshot's size, and the peak disk space the
// restore's data dir and scratch took (sampled every 20 ms), in MB and as a multiple of the
// database.
func BenchmarkRestore(b *testing.B) {
	for _, mib := range restoreBenchSizesMiB {
		b.Run(fmt.Sprintf("keyspace=%dMiB", mib), func(b *testing.B) { benchmarkRestoreSize(b, mib) })
	}
}

func benchmarkRestoreSize(b *testing.B, mib int) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	src := startSourceTB(b)
	src.fill(ctx, b, "bench", mib)
	compressions := []snapshot.Compression{snapshot.CompressionNone, snapshot.CompressionGzip}
	chains := backUp(ctx, b, src, src.member, compressions)
	for _, withDelta := range []bool{false, true} {
		for _, comp := range compressions {
			chain, variant := chains.full[comp], "full"
			if withDelta {
				chain, variant = chains.delta[comp], fmt.Sprintf("full+%d-event-delta", benchDeltaEvents)
			}
			store := chains.stores[comp]
			b.Run(variant+"/"+comp.String(), func(b *testing.B) {
				var peak int64
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					root := b.TempDir()
					b.StartTimer()
					disk := startDiskPeak(root, 20*time.Millisecond)
					_, err := Restore(ctx, Options{Chain: chain, Open: store.Get, DataDir: filepath.Join(root, "new.etcd"),
						Name: "etcd-0", PeerURL: loopbackPeerURL(b), Token: "bench"})
					peak = max(peak, disk.stop())
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					_ = os.RemoveAll(root) // frees the disk before the next iteration
					b.StartTimer()
				}
				b.ReportMetric(float64(chains.dbBytes)*float64(b.N)/1e6/b.Elapsed().Seconds(), "MB/s")
				b.ReportMetric(float64(chains.stored[comp])/1e6, "stored-MB")
				b.ReportMetric(float64(peak)/1e6, "peak-disk-MB")
				b.ReportMetric(float64(peak)/float64(chains.dbBytes), "peak-disk-x-of-db")
				if withDelta {
					b.ReportMetric(float64(benchDeltaEvents*b.N)/b.Elapsed().Seconds(), "events/s")
				}
			})
		}
	}
}
