package datadir

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
)

// The tests judge copies of one real data dir, written by etcd itself: a single member that took
// golden.puts puts, with small WAL segments and frequent snapshots so that the WAL spans several
// files and holds snapshot records.
const (
	goldenPuts          = 300
	goldenSegmentBytes  = 32 << 10
	goldenSnapshotCount = 50
)

var golden struct {
	once                sync.Once
	root, dir           string
	memberID, clusterID uint64
	err                 error
}

func TestMain(m *testing.M) {
	// Set before any WAL is written, read by etcd's file pipeline when it cuts a segment.
	wal.SegmentSizeBytes = goldenSegmentBytes
	code := m.Run()
	if golden.root != "" {
		os.RemoveAll(golden.root)
	}
	os.Exit(code)
}

// goldenDir returns a fresh copy of the data dir etcd wrote, at <tmp>/data.
func goldenDir(t *testing.T) string {
	t.Helper()
	golden.once.Do(func() { golden.err = writeGolden() })
	if golden.err != nil {
		t.Fatalf("writing a data dir with etcd: %v", golden.err)
	}
	dst := filepath.Join(t.TempDir(), "data")
	if err := copyTree(golden.dir, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func writeGolden() error {
	root, err := os.MkdirTemp("", "datadir-golden-")
	if err != nil {
		return err
	}
	golden.root, golden.dir = root, filepath.Join(root, "data")
	peer, err := loopbackURL()
	if err != nil {
		return err
	}
	client, err := loopbackURL()
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "etcd-0", golden.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.SnapshotCount = goldenSnapshotCount
	// Closed cleanly before it is read: fsync adds only time.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("etcd not ready within 30s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := v3client.New(e.Server)
	defer c.Close()
	for i := range goldenPuts {
		if _, err := c.Put(ctx, fmt.Sprintf("key-%03d", i), strings.Repeat("v", 200)); err != nil {
			return err
		}
	}
	golden.memberID, golden.clusterID = uint64(e.Server.MemberID()), uint64(e.Server.Cluster().ID())
	return nil
}

func loopbackURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		return copyFile(p, to)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// walFiles lists the data dir's WAL files, oldest first.
func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "member", "wal", "*.wal"))
	if err != nil || len(names) < 3 {
		t.Fatalf("want at least 3 WAL files, got %v (%v)", names, err)
	}
	return names
}

// frame is one WAL record as etcd frames it: an 8-byte little-endian length (low 56 bits: the
// record's bytes; a negative length carries the padding in its top byte), then the record.
type frame struct {
	off, size int64 // size: length field, record and padding
}

func frames(t *testing.T, path string) []frame {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []frame
	for off := int64(0); off+8 <= int64(len(data)); {
		l := int64(binary.LittleEndian.Uint64(data[off:]))
		if l == 0 {
			break
		}
		rec, pad := l&(1<<56-1), int64(0)
		if l < 0 {
			pad = (l >> 56) & 0x7
		}
		out = append(out, frame{off: off, size: 8 + rec + pad})
		off += 8 + rec + pad
	}
	if len(out) < 3 {
		t.Fatalf("%s: want at least 3 records, got %d", path, len(out))
	}
	return out
}
