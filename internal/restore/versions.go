package restore

import (
	"fmt"

	"github.com/coreos/go-semver/semver"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
)

// versions are the storage schema and cluster versions a database records.
type versions struct {
	storage semver.Version
	cluster *semver.Version
}

func (v versions) String() string {
	c := "unset"
	if v.cluster != nil {
		c = v.cluster.String()
	}
	return fmt.Sprintf("storage %s, cluster %s", v.storage, c)
}

// readVersions reads them from a database file.
func readVersions(db string) (versions, error) {
	lg := zap.NewNop()
	be := backend.NewDefaultBackend(lg, db)
	defer be.Close()
	storage, err := schema.DetectSchemaVersion(lg, be.ReadTx())
	if err != nil {
		return versions{}, fmt.Errorf("detecting the storage version of %s: %w", db, err)
	}
	return versions{storage: storage, cluster: schema.NewMembershipBackend(lg, be).ClusterVersionFromBackend()}, nil
}

// matchVersions brings a restored member's database (in dataDir) back to the storage schema and
// cluster version of the backup it came from. The deltas are replayed on the etcd server this
// binary embeds, which raises both to its own version; a member running the backup's (older)
// etcd would refuse them ("version 3.7.0 is not supported", or a cluster that cannot be
// downgraded). etcd's own schema migration does the storage part, as `etcdutl migrate` does.
func matchVersions(dataDir string, want versions) error {
	lg := zap.NewNop()
	walDir := dataDir + "/member/wal"
	w, err := wal.OpenForRead(lg, walDir, &walpb.Snapshot{})
	if err != nil {
		return fmt.Errorf("opening the restored WAL: %w", err)
	}
	walVersion, err := wal.ReadWALVersion(w)
	w.Close()
	if err != nil {
		return fmt.Errorf("reading the restored WAL: %w", err)
	}
	be := backend.NewDefaultBackend(lg, dataDir+"/member/snap/db")
	defer be.Close()
	if err := schema.Migrate(lg, be.BatchTx(), walVersion, want.storage); err != nil {
		return fmt.Errorf("migrating the storage schema to %s: %w", want.storage, err)
	}
	if want.cluster != nil {
		schema.NewMembershipBackend(lg, be).MustSaveClusterVersionToBackend(want.cluster)
	}
	be.ForceCommit()
	return nil
}
