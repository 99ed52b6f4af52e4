// Package brfixture puts etcd-backup-restore's fixture chains (test/testdata/etcd-backup-restore,
// written by its independent generator in etcd-backup-restore's object format) into a backup
// store, as a bucket copied from an etcd-druid cluster holds them, and reads the keyspace a
// restore of them must serve (expected.json).
package brfixture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Chains names the fixture directories: one chain per compression, and a final full snapshot
// alone.
const (
	None  = "none"
	Gzip  = "gzip"
	Final = "final"
)

// Keyspace is expected.json: the source member's keys and values at the chains' end revision.
type Keyspace struct {
	Revision int64             `json:"revision"`
	Keys     map[string]string `json:"keys"`
}

// Dir is the fixture directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "etcd-backup-restore")
}

// Put copies the objects of chain (a fixture directory's v2/) into store under the same keys,
// and returns the keys.
func Put(ctx context.Context, store backupstore.Store, chain string) ([]string, error) {
	dir := filepath.Join(Dir(), chain)
	entries, err := os.ReadDir(filepath.Join(dir, "v2"))
	if err != nil {
		return nil, fmt.Errorf("reading fixture %s: %w", chain, err)
	}
	var keys []string
	for _, e := range entries {
		key := "v2/" + e.Name()
		b, err := os.ReadFile(filepath.Join(dir, "v2", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading fixture %s: %w", key, err)
		}
		if _, err := store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), backupstore.SHA256Hex(b)); err != nil {
			return nil, fmt.Errorf("putting %s into %s: %w", key, store, err)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// Expected reads the keyspace every fixture chain restores to.
func Expected() (Keyspace, error) {
	raw, err := os.ReadFile(filepath.Join(Dir(), "expected.json"))
	if err != nil {
		return Keyspace{}, fmt.Errorf("reading the expected keyspace: %w", err)
	}
	var k Keyspace
	if err := json.Unmarshal(raw, &k); err != nil {
		return Keyspace{}, fmt.Errorf("decoding the expected keyspace: %w", err)
	}
	return k, nil
}
