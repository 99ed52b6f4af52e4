package main

import (
	"context"
	"flag"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// restoreOptions are the init step's backup store flags: backupstore.Flags, the member-agent's
// very set (internal/operator/resources copies every one of them), so a restore reads the store the
// backups went to. Without --backup-provider the member never restores.
type restoreOptions struct {
	store backupstore.Flags
}

func (o *restoreOptions) register(fs *flag.FlagSet) { o.store.Register(fs) }

// opener builds the store when a restore needs it (the Secret read then, as mounted then); nil
// when no store is configured. Its reads are retried with backoff: a store that blinks while a
// restore lists or opens the chain costs a few seconds, not a failed restore and a poll.
func (o *restoreOptions) opener() func(context.Context) (backupstore.Store, error) {
	if !o.store.Enabled() {
		return nil
	}
	flags := o.store
	return func(context.Context) (backupstore.Store, error) {
		store, err := flags.Open()
		if err != nil {
			return nil, err
		}
		return backupstore.Retrying(store, backupstore.DefaultBackoff), nil
	}
}
