package restore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/etcd-conductor/etcd-conductor/internal/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/backupstore"
)

// ErrNoFullSnapshot is returned when the store holds no full snapshot: there is nothing to
// restore from.
var ErrNoFullSnapshot = errors.New("the backup store holds no full snapshot")

// FromStore restores o's member from the latest chain in store (the one the backup loop
// continues, backup.LatestChain); o.Chain and o.Open are set here.
func FromStore(ctx context.Context, store backupstore.Store, o Options) (Result, error) {
	chain, ok, err := backup.LatestChain(ctx, store)
	if err != nil {
		return Result{}, fmt.Errorf("listing %s: %w", store, err)
	}
	if !ok {
		return Result{}, fmt.Errorf("%s: %w", store, ErrNoFullSnapshot)
	}
	o.Chain = chain
	o.Open = func(ctx context.Context, key string) (io.ReadCloser, error) { return store.Get(ctx, key) }
	return Restore(ctx, o)
}
