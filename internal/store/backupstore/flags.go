package backupstore

import (
	"flag"
	"fmt"
	"sort"
)

// Flags are the command-line flags that name a backup store. Every process that reads or writes
// one takes the same set: the member-agent's backup loop and the member init step's restore.
// internal/operator/resources renders them for the member-agent (Args) and copies every one of them to the
// init step (FlagNames), so a setting added here reaches both, and a restore can never read
// another store than the backups went to.
//
// The Secret's settings (credentials, region, endpoint, s3ForcePathStyle, trustedCaCert) are not
// flags: both processes read them from the mounted Secret (SecretDir) when they open the store.
type Flags struct {
	// Provider is spec.backup.store.provider; empty: no store.
	Provider string
	// Container is the bucket (S3) or the directory below LocalRoot (Local).
	Container string
	// Prefix is spec.backup.store.prefix.
	Prefix string
	// EndpointOverride is spec.backup.store.endpointOverride: it replaces the Secret's endpoint.
	EndpointOverride string
	// SecretDir is where the backup Secret is mounted; read again at every Config.
	SecretDir string
	// LocalRoot is where the Local provider's directory is mounted.
	LocalRoot string
	// Etcd (namespace/name) and EtcdUID are whose backups the store holds: the backup loop
	// claims the prefix for them and records them in every snapshot, a restore refuses a prefix
	// another Etcd claimed (internal/member/backup.Claim). Empty: neither.
	Etcd, EtcdUID string
	// Reach is the operator's endpoint allow-list (Reach.EndpointsFlag); set, an S3 endpoint it
	// refuses is not dialled. Empty: no check (a store the process was given directly).
	Reach string
}

// Register adds the store flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Provider, "backup-provider", f.Provider, "spec.backup.store.provider; empty: no backup store")
	fs.StringVar(&f.Container, "backup-container", f.Container, "bucket (S3) or directory (Local)")
	fs.StringVar(&f.Prefix, "backup-prefix", f.Prefix, "key prefix in the store")
	fs.StringVar(&f.EndpointOverride, "backup-endpoint-override", f.EndpointOverride, "S3 endpoint replacing the Secret's (spec.backup.store.endpointOverride)")
	fs.StringVar(&f.SecretDir, "backup-secret-dir", f.SecretDir, "the mounted backup Secret")
	fs.StringVar(&f.LocalRoot, "backup-local-root", f.LocalRoot, "where the Local provider's directory is mounted")
	fs.StringVar(&f.Etcd, "backup-owner", f.Etcd, "namespace/name of the Etcd whose backups these are")
	fs.StringVar(&f.EtcdUID, "backup-owner-uid", f.EtcdUID, "UID of that Etcd")
	fs.StringVar(&f.Reach, "backup-reach", f.Reach, "the operator's allow-list of S3 endpoints (JSON); empty: none checked")
}

// Enabled says whether a store is configured.
func (f Flags) Enabled() bool { return f.Provider != "" }

// Config is the store's configuration with the Secret as mounted now (a mounted Secret changes in
// place, so it is read at each call, not at start).
func (f Flags) Config() (Config, error) {
	secret, err := ReadSecretDir(f.SecretDir)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{
		Provider: f.Provider, Container: f.Container, Prefix: f.Prefix,
		EndpointOverride: f.EndpointOverride, Secret: secret, LocalRoot: f.LocalRoot,
	}
	if f.Reach != "" {
		reach, err := ParseEndpointsFlag(f.Reach)
		if err != nil {
			return Config{}, err
		}
		cfg.Reach = &reach
	}
	return cfg, nil
}

// Open builds the store from Config.
func (f Flags) Open() (Store, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	s, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("backup store: %w", err)
	}
	return s, nil
}

// Args renders f as command-line arguments, "--name=value" for every flag that is set, in name
// order. It walks Register's flags, so it renders every flag there is.
func (f Flags) Args() []string {
	copied := f
	fs := flag.NewFlagSet("store", flag.ContinueOnError)
	copied.Register(fs)
	var args []string
	fs.VisitAll(func(fl *flag.Flag) {
		if v := fl.Value.String(); v != "" {
			args = append(args, "--"+fl.Name+"="+v)
		}
	})
	return args
}

// FlagNames are the names of every store flag, without dashes, sorted.
func FlagNames() []string {
	var f Flags
	fs := flag.NewFlagSet("store", flag.ContinueOnError)
	f.Register(fs)
	var names []string
	fs.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	sort.Strings(names)
	return names
}
