// Package backup measures backup throughput against the keyspace size: a full snapshot streamed
// from a real etcd member over mTLS, spooled, uploaded to a real S3 server (versitygw) and
// verified there, exactly as the member-agent does it (backup.UploadFull). Restore throughput
// is measured beside it (internal/member/restore BenchmarkRestore), from 64 MiB up.
package backup

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	internalbackup "github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
)

// KeyspaceSizesMiB are the keyspace sizes the backup benchmark runs at (the restore benchmark in
// internal/member/restore runs 64 MiB, 256 MiB and 1 GiB; 64 MiB reads side by side).
var KeyspaceSizesMiB = []int{4, 16, 64}

// BenchmarkSnapshot reports MB/s (database bytes per second of stream + spool + upload + verify,
// as go test's own MB/s column) for each keyspace size.
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	c := etcdtest.Start(b, etcdtest.Config{Members: 1})
	member, err := etcdclient.DialMember(c.Client, c.Members[0].Target(), etcdclient.Options{CallTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = member.Close() })
	conn, err := c.Dial(0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	kv := pb.NewKVClient(conn)
	srv := s3server.StartT(b, "", "bench")
	store, err := backupstore.New(backupstore.Config{Provider: "S3", Container: "bench", Prefix: "snapshot", Secret: srv.SecretData()})
	if err != nil {
		b.Fatal(err)
	}
	filled := 0
	for _, mib := range KeyspaceSizesMiB {
		filled = Fill(ctx, b, kv, filled, mib)
		// One snapshot first, untimed: its size is what every timed one moves (the database
		// file; the member's reported DBSize lags its last batch commit).
		_, first, err := internalbackup.UploadFull(ctx, member, store, b.TempDir(), time.Now(), snapshot.CompressionNone)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("keyspace=%dMiB/full", mib), func(b *testing.B) {
			b.SetBytes(first.Size)
			for b.Loop() {
				if _, _, err := internalbackup.UploadFull(ctx, member, store, b.TempDir(), time.Now(), snapshot.CompressionNone); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(first.Size)/1e6, "dbMB")
		})
	}
}
