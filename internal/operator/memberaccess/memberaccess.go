package memberaccess

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// Config is what an Access is built from.
type Config struct {
	// Reader reads from the apiserver, uncached (the manager's APIReader): the Secrets an Etcd
	// names and, for Reach, its member pods.
	Reader client.Reader
	// SecretTTL is how long ClientTLS goes on using a Secret it read before it reads it again
	// (secretCache); zero reads it every time.
	SecretTTL time.Duration
	// DefaultClientTLS loads the operator-wide client key pair, for the Etcds that name none; nil
	// when the operator has none configured.
	DefaultClientTLS func() (conductortls.ClientMaterial, error)
	// StatefulSets reads an Etcd's StatefulSet (the manager's cached client): its template says
	// whether the members serve clients on TLS yet (internal/decide/transport). nil: the spec decides.
	StatefulSets client.Reader
}

// Access hands out the client key pair of an Etcd's members. The operator builds one and passes
// it to every controller that talks to members, so the Secrets an Etcd names are read, and the
// key pair built and verified from them, in one place for all of them.
type Access struct {
	reader client.Reader
	// secrets holds the Secrets ClientTLS read, for SecretTTL; nil reads them through reader.
	secrets    *secretCache
	defaultTLS func() (conductortls.ClientMaterial, error)
	built      *builtMaterials
	sets       client.Reader
}

// New builds an Access.
func New(cfg Config) *Access {
	a := &Access{reader: cfg.Reader, defaultTLS: cfg.DefaultClientTLS, built: newBuiltMaterials(conductortls.FromSecrets), sets: cfg.StatefulSets}
	if cfg.SecretTTL > 0 {
		a.secrets = newSecretCache(cfg.Reader, cfg.SecretTTL)
	}
	return a
}
