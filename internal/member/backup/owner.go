package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// SharedError says the store's prefix belongs to another Etcd: two Etcds writing one prefix
// would garbage-collect, chain and restore each other's snapshots, so the second is refused.
type SharedError struct {
	Store string
	Owner snapshot.Owner
	Etcd  string
}

func (e *SharedError) Error() string {
	return fmt.Sprintf("%s holds the backups of Etcd %s (%s); Etcd %s neither writes, deletes nor restores there: give it its own bucket or prefix",
		e.Store, e.Owner.Etcd, snapshot.OwnerKey, e.Etcd)
}

// Claim checks that the store's prefix is want's, or no one's. With write, an unclaimed prefix
// is claimed, and a claim of an earlier Etcd of the same namespace/name (deleted and created
// again, to restore its backups) is taken over; adopted then says whose it was. An empty
// want.Etcd claims nothing and is never refused (a caller that does not know its Etcd).
func Claim(ctx context.Context, store backupstore.Store, want snapshot.Owner, write bool) (adopted *snapshot.Owner, err error) {
	if want.Etcd == "" {
		return nil, nil
	}
	r, err := store.Get(ctx, snapshot.OwnerKey)
	if errors.Is(err, backupstore.ErrNotFound) {
		if !write {
			return nil, nil
		}
		return nil, putOwner(ctx, store, want)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the store's owner: %w", err)
	}
	body, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the store's owner: %w", err)
	}
	have, err := snapshot.DecodeOwner(body)
	if err != nil {
		return nil, err
	}
	if have.Etcd != want.Etcd {
		return nil, &SharedError{Store: store.String(), Owner: have, Etcd: want.Etcd}
	}
	if have.EtcdUID == want.EtcdUID || !write {
		return nil, nil
	}
	return &have, putOwner(ctx, store, want)
}

func putOwner(ctx context.Context, store backupstore.Store, o snapshot.Owner) error {
	b := snapshot.EncodeOwner(o)
	if _, err := store.Put(ctx, snapshot.OwnerKey, bytes.NewReader(b), int64(len(b)), backupstore.SHA256Hex(b)); err != nil {
		return fmt.Errorf("claiming the store for Etcd %s: %w", o.Etcd, err)
	}
	return nil
}
