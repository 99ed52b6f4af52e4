package restore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/etcd-conductor/etcd-conductor/internal/backupstore"
	"github.com/etcd-conductor/etcd-conductor/internal/snapshot"
)

// ErrNoFullSnapshot is returned when the store holds no full snapshot: there is nothing to
// restore from.
var ErrNoFullSnapshot = errors.New("the backup store holds no full snapshot")

// LatestChain lists the store and picks the latest full snapshot and the deltas continuing it.
func LatestChain(ctx context.Context, store backupstore.Store) (snapshot.Chain, error) {
	objects, err := store.List(ctx, snapshot.Dir)
	if err != nil {
		return snapshot.Chain{}, fmt.Errorf("listing %s: %w", store, err)
	}
	keys := make([]string, 0, len(objects))
	for _, o := range objects {
		keys = append(keys, o.Key)
	}
	snaps, _ := snapshot.ParseAll(keys)
	chain, ok := snapshot.Latest(snaps)
	if !ok {
		return snapshot.Chain{}, fmt.Errorf("%s: %w (%d objects)", store, ErrNoFullSnapshot, len(objects))
	}
	return chain, nil
}

// FromStore restores o's member from the latest chain in store; o.Chain and o.Open are set here.
func FromStore(ctx context.Context, store backupstore.Store, o Options) (Result, error) {
	chain, err := LatestChain(ctx, store)
	if err != nil {
		return Result{}, err
	}
	o.Chain = chain
	o.Open = func(ctx context.Context, key string) (io.ReadCloser, error) { return store.Get(ctx, key) }
	return Restore(ctx, o)
}
