package main

import (
	"context"
	"flag"

	"github.com/etcd-conductor/etcd-conductor/internal/backupstore"
)

// restoreOptions are the init step's backup store flags (the member-agent's names); without
// --backup-provider the member never restores.
type restoreOptions struct {
	provider, container, prefix, secretDir, localRoot string
}

func (o *restoreOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.provider, "backup-provider", "", "spec.backup.store.provider; empty: no backup to restore from")
	fs.StringVar(&o.container, "backup-container", "", "bucket (S3) or directory (Local)")
	fs.StringVar(&o.prefix, "backup-prefix", "", "key prefix in the store")
	fs.StringVar(&o.secretDir, "backup-secret-dir", "", "the mounted backup Secret")
	fs.StringVar(&o.localRoot, "backup-local-root", "", "where the Local provider's volume is mounted")
}

// opener builds the store when a restore needs it (the Secret read then, as mounted then); nil
// when no store is configured.
func (o *restoreOptions) opener() func(context.Context) (backupstore.Store, error) {
	if o.provider == "" {
		return nil
	}
	return func(context.Context) (backupstore.Store, error) {
		secret, err := backupstore.ReadSecretDir(o.secretDir)
		if err != nil {
			return nil, err
		}
		return backupstore.New(backupstore.Config{Provider: o.provider, Container: o.container, Prefix: o.prefix, Secret: secret, LocalRoot: o.localRoot})
	}
}
