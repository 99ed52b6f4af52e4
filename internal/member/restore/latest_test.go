package restore

import (
	"context"
	"errors"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/brfixture"
)

// TestLatest: what a new Etcd's member asks before bootstrapping. An empty store holds no
// backup; a copied etcd-backup-restore bucket does; a store another Etcd claimed is refused (its
// backups are never restored here); one claimed by an earlier Etcd of the same name is not.
func TestLatest(t *testing.T) {
	ctx := context.Background()
	me := snapshot.Owner{Etcd: "team-b/etcd-main", EtcdUID: "2"}
	for _, tc := range []struct {
		name     string
		fixture  string
		claim    *snapshot.Owner
		wantOK   bool
		wantFull string
		shared   bool
	}{
		{name: "empty store", wantOK: false},
		{name: "etcd-backup-restore chain", fixture: "gzip", wantOK: true, wantFull: "Full-00000000-00000037-1795000000.gz"},
		{name: "etcd-backup-restore final full snapshot", fixture: "final", wantOK: true, wantFull: "Full-00000000-00000059-1795000080.gz.final"},
		{name: "claimed by another Etcd", fixture: "gzip", claim: &snapshot.Owner{Etcd: "team-a/etcd-main", EtcdUID: "1"}, shared: true},
		{name: "claimed by an earlier Etcd of this name", fixture: "gzip", claim: &snapshot.Owner{Etcd: "team-b/etcd-main", EtcdUID: "1"}, wantOK: true,
			wantFull: "Full-00000000-00000037-1795000000.gz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := backupstore.NewLocal(t.TempDir(), "backups", "etcd-main")
			if err != nil {
				t.Fatal(err)
			}
			if tc.fixture != "" {
				if _, err := brfixture.Put(ctx, store, tc.fixture); err != nil {
					t.Fatal(err)
				}
			}
			if tc.claim != nil {
				if _, err := backup.Claim(ctx, store, *tc.claim, true); err != nil {
					t.Fatal(err)
				}
			}
			chain, ok, err := Latest(ctx, store, me)
			var shared *backup.SharedError
			if tc.shared {
				if !errors.As(err, &shared) {
					t.Fatalf("error %v, want a SharedError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK || (ok && chain.Full.Name() != tc.wantFull) {
				t.Fatalf("Latest = %s, %v; want %q, %v", chain.Full.Name(), ok, tc.wantFull, tc.wantOK)
			}
		})
	}
}
