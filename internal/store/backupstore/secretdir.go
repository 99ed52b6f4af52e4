package backupstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ReadSecretDir reads the keys of a mounted Secret (kubelet's ..data links and dot files are
// not keys), for Config.Secret. An empty dir name is no Secret (a Local store needs none).
func ReadSecretDir(dir string) (map[string][]byte, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("backup secret: %w", err)
	}
	data := map[string][]byte{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if info, err := os.Stat(path); err != nil || info.IsDir() {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("backup secret key %s: %w", e.Name(), err)
		}
		data[e.Name()] = b
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("backup secret: no keys in %s (is the Secret missing?)", dir)
	}
	return data, nil
}
