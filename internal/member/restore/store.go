package restore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// ErrNoFullSnapshot is returned when the store holds no full snapshot: there is nothing to
// restore from.
var ErrNoFullSnapshot = errors.New("the backup store holds no full snapshot")

// Latest is the chain a restore from store would start from (ok false: the store holds no full
// snapshot). A store another Etcd claimed (owner.json) is refused with backup.SharedError, as
// FromStore refuses it: its backups are never restored here. The new Etcd's members ask it
// before bootstrapping, so one whose store already holds a backup (a copied etcd-druid bucket,
// an Etcd deleted and created again) starts from it instead of empty.
func Latest(ctx context.Context, store backupstore.Store, owner snapshot.Owner) (chain snapshot.Chain, ok bool, err error) {
	if _, err := backup.Claim(ctx, store, owner, false); err != nil {
		return snapshot.Chain{}, false, err
	}
	snaps, _, err := listSnapshots(ctx, store)
	if err != nil {
		return snapshot.Chain{}, false, err
	}
	chain, ok = snapshot.Latest(snaps)
	return chain, ok, nil
}

// listSnapshots lists the snapshots in store, with the size of each object by key.
func listSnapshots(ctx context.Context, store backupstore.Store) ([]snapshot.Snapshot, map[string]int64, error) {
	objs, err := store.List(ctx, snapshot.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", store, err)
	}
	keys := make([]string, 0, len(objs))
	sizes := make(map[string]int64, len(objs))
	for _, obj := range objs {
		keys = append(keys, obj.Key)
		sizes[obj.Key] = obj.Size
	}
	snaps, _ := snapshot.ParseAll(keys)
	return snaps, sizes, nil
}

// FromStore restores o's member from the latest chain in store (the one the backup loop
// continues, backup.LatestChain); o.Chain and o.Open are set here. A full snapshot that cannot
// be restored (corrupt, truncated) is passed over for the one before it and its deltas, and the
// Result says so. owner is the Etcd restoring: a store another Etcd owns is refused (an empty
// owner.Etcd checks nothing).
func FromStore(ctx context.Context, store backupstore.Store, owner snapshot.Owner, o Options) (Result, error) {
	if _, err := backup.Claim(ctx, store, owner, false); err != nil {
		return Result{}, err
	}
	snaps, sizes, err := listSnapshots(ctx, store)
	if err != nil {
		return Result{}, err
	}
	o.Open = func(ctx context.Context, key string) (io.ReadCloser, error) { return store.Get(ctx, key) }
	var fellBack []string
	for {
		chain, ok := snapshot.Latest(snaps)
		if !ok {
			if len(fellBack) > 0 {
				return Result{FellBack: fellBack}, fmt.Errorf("%s: no full snapshot can be restored (%v): %w", store, fellBack, ErrNoFullSnapshot)
			}
			return Result{}, fmt.Errorf("%s: %w", store, ErrNoFullSnapshot)
		}
		o.Chain = chain
		if o.FullOrigin, err = fullOrigin(ctx, store, chain.Full); err != nil {
			return Result{FellBack: fellBack}, err
		}
		// At least the snapshot as stored (compressed, it is more once written) and etcd's copy of
		// it: refused before anything is read. Restore checks again on the real size.
		if need := 2*sizes[chain.Full.Key()] + walReserve; need > walReserve {
			if err := CheckFreeSpace(o.DataDir, need); err != nil {
				return Result{FellBack: fellBack}, fmt.Errorf("restoring %s (%d bytes as stored): %w", chain.Full.Name(), sizes[chain.Full.Key()], err)
			}
		}
		res, err := Restore(ctx, o)
		var bad *FullSnapshotError
		if !errors.As(err, &bad) {
			res.FellBack = append(fellBack, res.FellBack...)
			return res, err
		}
		o.Log.Info("Full snapshot cannot be restored; falling back to the one before", "snapshot", chain.Full.Name(), "error", bad.Err.Error())
		fellBack = append(fellBack, fmt.Sprintf("%s (%v)", chain.Full.Name(), bad.Err))
		snaps = without(snaps, chain.Full)
	}
}

// fullOrigin is who wrote a full snapshot, from its record; nil when none is recorded (or the
// record does not decode). A store that does not answer is an error: restoring without the
// origin would replay deltas of whichever cluster came first.
func fullOrigin(ctx context.Context, store backupstore.Store, full snapshot.Snapshot) (*snapshot.Origin, error) {
	r, err := store.Get(ctx, snapshot.FullMetaKey(full))
	switch {
	case missing(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the record of full snapshot %s: %w", full.Name(), err)
	}
	defer r.Close()
	m, err := snapshot.DecodeFullMeta(r)
	if err != nil {
		return nil, nil
	}
	return &m.Origin, nil
}

func without(snaps []snapshot.Snapshot, drop snapshot.Snapshot) []snapshot.Snapshot {
	out := make([]snapshot.Snapshot, 0, len(snaps))
	for _, s := range snaps {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}
