// Package liveness measures how the members' liveness probe (GET /metrics on the metrics
// listener, every 10 s, 10 s timeout, restart after 6 failures: resources.etcdLivenessProbe) and
// readiness probe (GET /readyz, 2 s timeout) fare while etcd defragments a large database, the
// longest stall a healthy member goes through: a real etcd member, a database of the given size
// with half of it free (every other key deleted, compacted), and probes every 250 ms with the
// kubelet's timeouts during the defragmentation.
package liveness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/test/bench/backup"
)

// DatabaseSizesMiB are the keyspace sizes defragmented (make bench-liveness).
var DatabaseSizesMiB = []int{256, 1024}

const (
	livenessTimeout  = 10 * time.Second // resources.etcdLivenessProbe
	readinessTimeout = 2 * time.Second  // resources' readiness probe
	probeEvery       = 250 * time.Millisecond
)

// probeLog is what one kind of probe saw during the defragmentation.
type probeLog struct {
	mu       sync.Mutex
	max      time.Duration
	failures int
	count    int
}

func (l *probeLog) record(took time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count++
	l.max = max(l.max, took)
	if !ok {
		l.failures++
	}
}

// probe GETs url every probeEvery with timeout until ctx ends; a probe fails as the kubelet's
// would: no answer within the timeout, or a status outside 200-399.
func probe(ctx context.Context, url string, timeout time.Duration, log *probeLog) {
	client := &http.Client{Timeout: timeout}
	for ctx.Err() == nil {
		start := time.Now()
		resp, err := client.Get(url)
		ok := err == nil && resp.StatusCode >= 200 && resp.StatusCode < 400
		if err == nil {
			resp.Body.Close()
		}
		log.record(time.Since(start), ok)
		select {
		case <-ctx.Done():
		case <-time.After(probeEvery):
		}
	}
}

func freePort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// BenchmarkLivenessDuringDefrag reports, per database size: the defragmentation's duration, the
// slowest /metrics (liveness) and /readyz (readiness) answers and how many probes failed. A
// liveness failure needs six in a row 10 s apart to restart a member: a healthy member under a
// defragmentation must show none.
func BenchmarkLivenessDuringDefrag(b *testing.B) {
	ctx := context.Background()
	for _, mib := range DatabaseSizesMiB {
		b.Run(fmt.Sprintf("db=%dMiB", mib), func(b *testing.B) {
			metrics := fmt.Sprintf("http://127.0.0.1:%d", freePort(b))
			c := etcdtest.Start(b, etcdtest.Config{Members: 1, ExtraArgs: []string{
				"--listen-metrics-urls=" + metrics, "--quota-backend-bytes=8589934592"}})
			conn, err := c.Dial(0)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = conn.Close() })
			kv, maint := pb.NewKVClient(conn), pb.NewMaintenanceClient(conn)
			backup.Fill(ctx, b, kv, 0, mib)
			// Every other value deleted and the history compacted: half the file is free pages,
			// which the defragmentation gives back by rewriting the rest.
			var rev int64
			for n := 0; n < mib*16; n += 2 {
				resp, err := kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: fmt.Appendf(nil, "bench/%06d", n)})
				if err != nil {
					b.Fatal(err)
				}
				rev = resp.Header.Revision
			}
			if _, err := kv.Compact(ctx, &pb.CompactionRequest{Revision: rev, Physical: true}); err != nil {
				b.Fatal(err)
			}
			var took time.Duration
			var before, after int64
			var live, ready probeLog
			for b.Loop() {
				st, err := maint.Status(ctx, &pb.StatusRequest{})
				if err != nil {
					b.Fatal(err)
				}
				before = st.DbSize
				pctx, stop := context.WithCancel(ctx)
				var wg sync.WaitGroup
				wg.Add(2)
				go func() { defer wg.Done(); probe(pctx, metrics+"/metrics", livenessTimeout, &live) }()
				go func() { defer wg.Done(); probe(pctx, metrics+"/readyz", readinessTimeout, &ready) }()
				start := time.Now()
				if _, err := maint.Defragment(ctx, &pb.DefragmentRequest{}); err != nil {
					b.Fatal(err)
				}
				took = time.Since(start)
				stop()
				wg.Wait()
				if st, err = maint.Status(ctx, &pb.StatusRequest{}); err != nil {
					b.Fatal(err)
				}
				after = st.DbSize
			}
			b.ReportMetric(float64(before)/1e6, "dbMB-before")
			b.ReportMetric(float64(after)/1e6, "dbMB-after")
			b.ReportMetric(took.Seconds(), "defrag-s")
			b.ReportMetric(float64(live.max.Milliseconds()), "liveness-max-ms")
			b.ReportMetric(float64(live.failures), "liveness-failures")
			b.ReportMetric(float64(ready.max.Milliseconds()), "readiness-max-ms")
			b.ReportMetric(float64(ready.failures), "readiness-failures")
			b.ReportMetric(float64(live.count), "probes")
		})
	}
}
