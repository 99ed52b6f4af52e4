package resources

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// StoreConfig is the store an etcd-druid StoreSpec names, with secret the data of the Secret its
// secretRef names (nil when it names none), as the manager opens it itself (an
// EtcdCopyBackupsTask's source and target). Everything that can be checked without contacting
// the store is: the provider, the container, the Secret's keys (S3) or its hostPath (Local). The
// error says which field or key is wrong, for a task's status.
//
// Where the store may be is reach's to say: the S3 endpoint and, for the Local provider, the
// host root. The Local provider is <hostPath>/<container>/<prefix>, etcd-druid's layout, read
// where the manager runs: an Etcd's own Local store is below <hostPath>/<namespace>/<name>
// (LocalBackupHostDir), so a task names it with that in the container, and a task of namespace
// reaches only the directories of that namespace's Etcds: the container must start with
// "<namespace>/<etcd>/". The Config's LocalRoot is then that Etcd's directory and its Container
// the rest.
func StoreConfig(store druidv1alpha1.StoreSpec, secret map[string][]byte, reach backupstore.Reach, namespace string) (backupstore.Config, error) {
	cfg := backupstore.Config{
		Provider: string(ptr.Deref(store.Provider, "")), Container: ptr.Deref(store.Container, ""), Prefix: store.Prefix,
		EndpointOverride: ptr.Deref(store.EndpointOverride, ""), Secret: secret,
	}
	provider, err := backupstore.ParseProvider(cfg.Provider)
	if err != nil {
		return backupstore.Config{}, fmt.Errorf("provider: %w", err)
	}
	if cfg.Container == "" {
		return backupstore.Config{}, fmt.Errorf("container is not set: the %s store needs a bucket or directory", provider)
	}
	if provider == backupstore.ProviderLocal {
		if cfg.LocalRoot, err = reach.LocalRoot(secret); err != nil {
			return backupstore.Config{}, secretKeyError(err)
		}
		if err := localInNamespace(cfg.Container, cfg.Prefix, namespace); err != nil {
			return backupstore.Config{}, err
		}
		// The Etcd's directory is the boundary the store is opened within (backupstore.Local):
		// its pods can write below it, not it, so no link they plant leads out of it.
		parts := strings.SplitN(strings.Trim(cfg.Container, "/"), "/", 3)
		cfg.LocalRoot, cfg.Container = path.Join(cfg.LocalRoot, parts[0], parts[1]), parts[2]
		return cfg, nil
	}
	if secret == nil {
		return backupstore.Config{}, fmt.Errorf("secretRef is not set: the %s store needs credentials (%s, %s)",
			provider, backupstore.KeyAccessKeyID, backupstore.KeySecretAccessKey)
	}
	settings, err := backupstore.ParseS3Secret(backupstore.WithEndpointOverride(secret, cfg.EndpointOverride))
	if err != nil {
		return backupstore.Config{}, secretKeyError(err)
	}
	if err := reach.CheckEndpoint(settings); err != nil {
		return backupstore.Config{}, secretKeyError(err)
	}
	return cfg, nil
}

// localInNamespace refuses a Local container that does not lie in the directory of one of
// namespace's Etcds (<namespace>/<etcd>/…, no "..", no empty or "." element): below an allowed
// root, the namespace's Etcds alone have their directories there.
func localInNamespace(container, prefix, namespace string) error {
	parts := strings.Split(strings.Trim(container, "/"), "/")
	if len(parts) < 3 || parts[0] != namespace {
		return fmt.Errorf("container %q: a Local store of a task in namespace %s is a directory below %s/ (<namespace>/<etcd name>/<container>, where that Etcd's store is)", container, namespace, namespace)
	}
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		parts = append(parts, strings.Split(prefix, "/")...)
	}
	for _, p := range parts {
		if p == ".." || p == "." || p == "" {
			return fmt.Errorf("container %q, prefix %q: no \"..\", \".\" or empty path element", container, prefix)
		}
	}
	return nil
}

func secretKeyError(err error) error {
	var serr *backupstore.SecretError
	if errors.As(err, &serr) {
		return fmt.Errorf("key %s of the Secret: %s", serr.Key, serr.Reason)
	}
	return err
}
