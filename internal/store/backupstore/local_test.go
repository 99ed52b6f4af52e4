package backupstore_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore/storetest"
)

func TestLocalStore(t *testing.T) {
	root := t.TempDir()
	s, err := backupstore.New(backupstore.Config{Provider: "Local", Container: "backups", Prefix: "shoot/etcd-main", LocalRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, s)

	t.Run("a corrupted object fails on read", func(t *testing.T) {
		path := filepath.Join(root, "backups", "shoot/etcd-main", "v2/Full-00000000-00000010-1")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[10] ^= 0xff
		if err := os.WriteFile(path, b, 0o640); err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(t.Context(), "v2/Full-00000000-00000010-1")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		_, err = io.ReadAll(r)
		var verr *backupstore.VerifyError
		if !errors.As(err, &verr) || verr.What != "sha256" {
			t.Fatalf("reading a corrupted object: %v, want a sha256 VerifyError", err)
		}
	})
}
