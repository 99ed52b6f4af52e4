// Package restore rebuilds one member's data directory from a backup chain (internal/snapshot):
// the full snapshot is restored with etcd's own restore (etcdutl's snapshot library), then the
// deltas are replayed in revision order on a single-member etcd embedded in this process, bound
// to loopback only, and a snapshot of that is restored once more under the member's real name,
// peer URL and a new cluster token (DEP-01, "Recovering an etcd cluster from failure of majority
// of members": restore a single-member cluster, apply the incremental snapshots, then add the
// other members).
//
// Every delta's checksum is verified before it is replayed; a missing, unreadable or corrupt
// delta ends the replay at the last good revision, and the Result says so: the data restored is
// then older than the backup's end, which is better than no cluster, but never hidden.
package restore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdutlsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"

	"github.com/etcd-conductor/etcd-conductor/internal/snapshot"
)

// Options says what to restore and as which member.
type Options struct {
	// Chain is the full snapshot and the deltas that continue it (snapshot.Latest).
	Chain snapshot.Chain
	// Open reads one object of the chain by its key (snapshot.Snapshot.Key, below the store's
	// prefix).
	Open func(ctx context.Context, key string) (io.ReadCloser, error)
	// DataDir is the member's data dir. It must hold no member data: a restore never writes over
	// data (an empty dir, or one without a member directory, is replaced).
	DataDir string
	// Name, PeerURL and Token are the restored member's etcd name, advertised peer URL and the
	// new cluster's initial-cluster-token; a new token gives the new cluster a new cluster ID.
	Name    string
	PeerURL string
	Token   string
	Log     logr.Logger
}

// Result says what was restored, with the figures a report needs.
type Result struct {
	// FullRevision is the full snapshot's revision; Revision the revision reached after the
	// deltas; WantedRevision what the whole chain would have reached.
	FullRevision, Revision, WantedRevision int64
	DeltasApplied, DeltasInChain           int
	// EventsApplied counts the replayed events (puts and deletes).
	EventsApplied int
	// Stopped says why the replay ended before WantedRevision ("" when it did not).
	Stopped string
	// HashChecked: the full snapshot carried etcd's SHA-256 trailer and it matched.
	HashChecked bool
	// Bytes is what was read from the store (full snapshot and deltas); DBBytes the size of the
	// database the member starts from.
	Bytes, DBBytes int64
	// Keys is the number of keys in the restored database.
	Keys     int
	Duration time.Duration
}

func (r Result) String() string {
	s := fmt.Sprintf("full snapshot at revision %d, %d of %d deltas (%d events), revision %d of %d, %d keys, %d bytes read in %s",
		r.FullRevision, r.DeltasApplied, r.DeltasInChain, r.EventsApplied, r.Revision, r.WantedRevision, r.Keys, r.Bytes, r.Duration.Round(time.Millisecond))
	if r.Stopped != "" {
		s += "; stopped early: " + r.Stopped
	}
	return s
}

// Restore writes the member's data dir from the chain. On error nothing is left in DataDir.
func Restore(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	res := Result{FullRevision: o.Chain.Full.EndRevision, WantedRevision: o.Chain.EndRevision(), DeltasInChain: len(o.Chain.Deltas)}
	if err := checkTarget(o.DataDir); err != nil {
		return res, err
	}
	// Scratch space next to the data dir: the same volume, so the final rename is atomic, and
	// leftovers of an attempt that died are this package's own and removed.
	work := o.DataDir + ".restore-work"
	if err := os.RemoveAll(work); err != nil {
		return res, fmt.Errorf("clearing %s: %w", work, err)
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return res, fmt.Errorf("creating %s: %w", work, err)
	}
	defer os.RemoveAll(work)

	full := filepath.Join(work, "full.db")
	n, err := download(ctx, o.Open, o.Chain.Full, full)
	if err != nil {
		return res, fmt.Errorf("reading full snapshot %s: %w", o.Chain.Full.Name(), err)
	}
	// Maintenance.Snapshot appends the SHA-256 of the database; etcdutl checks it when present
	// (its length is then 32 past a page boundary); download says so by the sign.
	res.HashChecked = n > 0
	res.Bytes += max(n, -n)

	db := full
	var source *versions
	if len(o.Chain.Deltas) > 0 {
		replayed := filepath.Join(work, "replayed.db")
		v, err := replay(ctx, o, &res, full, res.HashChecked, filepath.Join(work, "replay.etcd"), replayed)
		if err != nil {
			return res, err
		}
		source = &v
		db = replayed
		res.HashChecked = true // the replayed database's snapshot carries its hash
	} else {
		res.Revision = res.FullRevision
	}

	staged := o.DataDir + ".restoring"
	if err := os.RemoveAll(staged); err != nil {
		return res, fmt.Errorf("clearing %s: %w", staged, err)
	}
	if err := restoreDB(db, staged, o.Name, o.PeerURL, o.Token, !res.HashChecked); err != nil {
		return res, fmt.Errorf("restoring %s as member %s: %w", filepath.Base(db), o.Name, err)
	}
	if source != nil {
		if err := matchVersions(staged, *source); err != nil {
			return res, fmt.Errorf("bringing the replayed data back to the backup's versions (%s): %w", source, err)
		}
	}
	if st, err := etcdutlsnapshot.NewV3(zap.NewNop()).Status(filepath.Join(staged, "member", "snap", "db")); err == nil {
		res.Keys, res.DBBytes = st.TotalKey, st.TotalSize
	}
	if err := os.RemoveAll(o.DataDir); err != nil { // checked above: holds no member data
		return res, fmt.Errorf("replacing %s: %w", o.DataDir, err)
	}
	if err := os.Rename(staged, o.DataDir); err != nil {
		return res, fmt.Errorf("moving the restored data into %s: %w", o.DataDir, err)
	}
	res.Duration = time.Since(start)
	return res, nil
}

// checkTarget refuses a data dir that holds a member directory: restoring never replaces data.
func checkTarget(dir string) error {
	_, err := os.Stat(filepath.Join(dir, "member"))
	switch {
	case err == nil:
		return fmt.Errorf("%s holds a member directory: refusing to restore over data", dir)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("inspecting %s: %w", dir, err)
	}
	return nil
}

func download(ctx context.Context, open func(context.Context, string) (io.ReadCloser, error), s snapshot.Snapshot, path string) (int64, error) {
	r, err := open(ctx, s.Key())
	if err != nil {
		return 0, err
	}
	defer r.Close()
	counted := &countingReader{r: r}
	content, err := snapshot.Decompress(counted, s.Compression)
	if err != nil {
		return 0, err
	}
	defer content.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	written, err := io.Copy(f, content)
	n := counted.n
	if err == nil && written%512 != sha256.Size {
		n = -n // no hash trailer: see Restore
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// restoreDB is etcdutl's snapshot restore into dir, as a single-member cluster.
func restoreDB(db, dir, name, peerURL, token string, skipHash bool) error {
	return etcdutlsnapshot.NewV3(zap.NewNop()).Restore(etcdutlsnapshot.RestoreConfig{
		SnapshotPath:        db,
		Name:                name,
		OutputDataDir:       dir,
		PeerURLs:            []string{peerURL},
		InitialCluster:      name + "=" + peerURL,
		InitialClusterToken: token,
		SkipHashCheck:       skipHash,
	})
}

// replayName is the embedded member's name; it never leaves this process.
const replayName = "replay"

// replay restores the full snapshot into dir, starts it as a loopback-only single-member etcd,
// applies the deltas and writes a snapshot of the result to out. It returns the storage and
// cluster versions the full snapshot recorded.
func replay(ctx context.Context, o Options, res *Result, full string, hashed bool, dir, out string) (versions, error) {
	var source versions
	peerPort, clientPort, err := freePorts()
	if err != nil {
		return source, err
	}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", peerPort)}
	cli := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", clientPort)}
	if err := restoreDB(full, dir, replayName, peer.String(), "replay", !hashed); err != nil {
		return source, fmt.Errorf("restoring full snapshot %s: %w", o.Chain.Full.Name(), err)
	}
	if source, err = readVersions(filepath.Join(dir, "member", "snap", "db")); err != nil {
		return source, err
	}
	cfg := embed.NewConfig()
	cfg.Name = replayName
	cfg.Dir = dir
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cli}, []url.URL{cli}
	cfg.InitialCluster = replayName + "=" + peer.String()
	// Its errors surface through e.Err() and the client; its logs (closing listeners) are noise.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Scratch data: its snapshot is taken before it is closed, nothing depends on it surviving
	// a crash (a restore that dies starts again from the store).
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return source, fmt.Errorf("starting the replay member: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return source, fmt.Errorf("replay member: %w", err)
	case <-ctx.Done():
		return source, ctx.Err()
	case <-time.After(time.Minute):
		return source, errors.New("replay member did not become ready within a minute")
	}
	c := v3client.New(e.Server)
	defer c.Close()

	res.Revision = res.FullRevision
	if st, err := c.Get(ctx, "\x00", clientv3.WithCountOnly()); err == nil && st.Header.Revision != res.FullRevision {
		// The snapshot's name and its content disagree: trust the content.
		o.Log.Info("Full snapshot holds another revision than its name says", "name", o.Chain.Full.Name(), "revision", st.Header.Revision)
		res.Revision = st.Header.Revision
	}
	for _, d := range o.Chain.Deltas {
		if d.StartRevision > res.Revision+1 {
			res.Stopped = fmt.Sprintf("delta %s starts at revision %d, after the %d reached: a gap", d.Name(), d.StartRevision, res.Revision)
			break
		}
		f, err := readDelta(ctx, o.Open, d, &res.Bytes)
		if err != nil {
			res.Stopped = fmt.Sprintf("delta %s: %v; stopped at revision %d", d.Name(), err, res.Revision)
			break
		}
		applied, err := apply(ctx, c, f.Events, &res.Revision)
		res.EventsApplied += applied
		if err != nil {
			return source, fmt.Errorf("replaying delta %s: %w", d.Name(), err)
		}
		res.DeltasApplied++
		o.Log.V(1).Info("Delta replayed", "delta", d.Name(), "events", applied, "revision", res.Revision)
	}
	if res.Stopped == "" && o.Chain.Gap != "" {
		res.Stopped = o.Chain.Gap
	}
	if err := saveSnapshot(ctx, c, out); err != nil {
		return source, fmt.Errorf("snapshot of the replayed data: %w", err)
	}
	return source, nil
}

func readDelta(ctx context.Context, open func(context.Context, string) (io.ReadCloser, error), d snapshot.Snapshot, read *int64) (snapshot.DeltaFile, error) {
	r, err := open(ctx, d.Key())
	if err != nil {
		return snapshot.DeltaFile{}, err
	}
	defer r.Close()
	counted := &countingReader{r: r}
	content, err := snapshot.Decompress(counted, d.Compression)
	if err != nil {
		return snapshot.DeltaFile{}, err
	}
	defer content.Close()
	f, err := snapshot.ReadDelta(content)
	*read += counted.n
	if err != nil {
		return f, err
	}
	if f.StartRevision != d.StartRevision || f.EndRevision != d.EndRevision {
		return f, fmt.Errorf("holds revisions %d..%d, its name says %d..%d", f.StartRevision, f.EndRevision, d.StartRevision, d.EndRevision)
	}
	return f, nil
}

// apply replays events above *rev, one transaction per source revision, so a source transaction
// stays one transaction and the revisions advance as they did at the source. Keys keep no lease:
// the leases of the old cluster do not exist here.
func apply(ctx context.Context, c *clientv3.Client, events []snapshot.Event, rev *int64) (int, error) {
	applied := 0
	for i := 0; i < len(events); {
		r := events[i].ModRevision
		var ops []clientv3.Op
		j := i
		for ; j < len(events) && events[j].ModRevision == r; j++ {
			e := events[j]
			switch e.Type {
			case snapshot.EventPut:
				ops = append(ops, clientv3.OpPut(string(e.Key), string(e.Value)))
			case snapshot.EventDelete:
				ops = append(ops, clientv3.OpDelete(string(e.Key)))
			}
		}
		if r > *rev {
			resp, err := c.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				return applied, fmt.Errorf("revision %d (%d events): %w", r, len(ops), err)
			}
			applied += len(ops)
			*rev = resp.Header.Revision
			if *rev < r {
				// Revisions without events (none exist in etcd's history) would leave the replay
				// behind; keep counting in source revisions so later events are not skipped.
				*rev = r
			}
		}
		i = j
	}
	return applied, nil
}

func saveSnapshot(ctx context.Context, c *clientv3.Client, path string) error {
	r, err := c.Snapshot(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// freePorts picks two free loopback ports for the replay member.
func freePorts() (string, string, error) {
	var ports []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", fmt.Errorf("picking a loopback port for the replay member: %w", err)
		}
		ls = append(ls, l)
		_, p, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, p)
	}
	return ports[0], ports[1], nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
