package backupstore

import (
	"fmt"
	"path"
	"strings"
)

// LocalHostPath is the host directory the Local provider's stores live below: the backup
// Secret's hostPath key when it is set, else DefaultLocalHostPath, as etcd-druid reads it. The
// error is a *SecretError for a value no host directory can be trusted at (see
// CheckLocalHostPath).
func LocalHostPath(secret map[string][]byte) (string, error) {
	p := strings.TrimSpace(string(secret[KeyHostPath]))
	if p == "" {
		return DefaultLocalHostPath, nil
	}
	if err := CheckLocalHostPath(p); err != nil {
		return "", err
	}
	return p, nil
}

// CheckLocalHostPath refuses a host directory that is not absolute and clean (kubelet refuses
// ".." too), and one strictly below DefaultLocalHostPath: every Etcd using the default has its
// directory there (<default>/<namespace>/<name>), so a root chosen inside it would give one
// Etcd's pods a directory inside another Etcd's store.
func CheckLocalHostPath(p string) error {
	switch {
	case !path.IsAbs(p):
		return &SecretError{Key: KeyHostPath, Reason: fmt.Sprintf("%q is not an absolute path", p)}
	case path.Clean(p) != p || strings.Contains(p, ".."):
		return &SecretError{Key: KeyHostPath, Reason: fmt.Sprintf("%q is not a clean path (no .., no //, no trailing /)", p)}
	case strings.HasPrefix(p, DefaultLocalHostPath+"/"):
		return &SecretError{Key: KeyHostPath, Reason: fmt.Sprintf("%q lies inside %s, where every Etcd on the default has its own directory", p, DefaultLocalHostPath)}
	}
	return nil
}
