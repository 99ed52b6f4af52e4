package backup

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// TestGarbageCollectionDeletesOnlyThisClustersSnapshots: of the snapshots the policy would
// remove, only those this etcd cluster wrote go; another cluster's (the one this cluster was
// restored from) and those whose writer is not recorded stay.
func TestGarbageCollectionDeletesOnlyThisClustersSnapshots(t *testing.T) {
	ctx := context.Background()
	store, err := backupstore.NewLocal(t.TempDir(), "backups", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, b []byte) {
		t.Helper()
		if _, err := store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), backupstore.SHA256Hex(b)); err != nil {
			t.Fatal(err)
		}
	}
	full := func(rev int64, age time.Duration, cluster string) snapshot.Snapshot {
		s := snapshot.Full(rev, at.Add(-age))
		put(s.Key(), []byte("db"))
		if cluster != "" {
			put(snapshot.FullMetaKey(s), snapshot.EncodeFullMeta(snapshot.FullMeta{Origin: snapshot.Origin{ClusterID: cluster}}))
		}
		return s
	}
	delta := func(start, end int64, cluster string) snapshot.Snapshot {
		s := snapshot.Delta(start, end, at)
		f := snapshot.DeltaFile{StartRevision: start, EndRevision: end}
		if cluster != "" {
			f.Origin = &snapshot.Origin{ClusterID: cluster}
		}
		var buf bytes.Buffer
		if err := snapshot.EncodeDeltaFile(&buf, f); err != nil {
			t.Fatal(err)
		}
		put(s.Key(), buf.Bytes())
		return s
	}
	oldCluster := full(10, 5*time.Hour, "old")
	unrecorded := full(20, 4*time.Hour, "")
	own := full(30, 3*time.Hour, "new")
	oldDelta := delta(11, 40, "old") // the old cluster's writes past the restore point
	ownDelta := delta(31, 40, "new")
	latest := full(50, time.Hour, "new")
	fallback := full(45, 2*time.Hour, "new")

	r := &Runner{cfg: Config{GCPolicy: snapshot.Policy{MaxFull: 2}}, clusterID: "new", metrics: NewMetrics(prometheus.NewRegistry()),
		log: testr.New(t), now: func() time.Time { return at }, origins: map[string]string{}, keptLogged: map[string]bool{}}
	r.gc(ctx, store)

	for _, tc := range []struct {
		s    snapshot.Snapshot
		kept bool
	}{
		{oldCluster, true}, {unrecorded, true}, {oldDelta, true},
		{own, false}, {ownDelta, false},
		{latest, true}, {fallback, true},
	} {
		_, err := store.Stat(ctx, tc.s.Key())
		if kept := err == nil; kept != tc.kept {
			t.Errorf("%s kept %v, want %v", tc.s.Name(), kept, tc.kept)
		}
	}
	if _, err := store.Stat(ctx, snapshot.FullMetaKey(own)); err == nil {
		t.Errorf("the record of %s outlived it", own.Name())
	}
}
