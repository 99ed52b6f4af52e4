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

// A link planted in a Local store's directory (whoever writes it: a member pod can, for its own
// Etcd's) must not make a reader of the store read a file outside the store's boundary: the
// manager copying a task's backups would otherwise copy out its own token, or another Etcd's
// snapshots, to wherever the task's target is.
func TestLocalStoreRefusesLinksOut(t *testing.T) {
	hosts := t.TempDir()
	outside := filepath.Join(hosts, "manager-token")
	if err := os.WriteFile(outside, []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Two Etcds' directories below one allowed root; the store is opened within etcd-a's.
	boundary := filepath.Join(hosts, "root", "shoot", "etcd-a")
	sibling := filepath.Join(hosts, "root", "shoot", "etcd-b", "backups", "etcd", "v2")
	if err := os.MkdirAll(sibling, 0o750); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"Full-00000000-00000020-1": "b's data"} {
		if err := os.WriteFile(filepath.Join(sibling, name), []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sibling, name+".sha256"), []byte(backupstore.SHA256Hex([]byte(content))), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	s, err := backupstore.NewLocal(boundary, "backups", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(boundary, "backups", "etcd", "v2")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	plant := func(t *testing.T, key, target, content string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, key)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, key+".sha256"), []byte(backupstore.SHA256Hex([]byte(content))), 0o640); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(filepath.Join(dir, key)); _ = os.Remove(filepath.Join(dir, key+".sha256")) })
	}
	for _, tc := range []struct{ name, key, target, content string }{
		{name: "an absolute link to a file of the reader's", key: "Full-00000000-00000010-1", target: outside, content: "token"},
		{name: "a relative link into a sibling Etcd's directory", key: "Full-00000000-00000020-1",
			target: "../../../../etcd-b/backups/etcd/v2/Full-00000000-00000020-1", content: "b's data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plant(t, tc.key, tc.target, tc.content)
			if r, err := s.Get(t.Context(), "v2/"+tc.key); err == nil {
				b, _ := io.ReadAll(r)
				r.Close()
				t.Fatalf("read %q through a link out of the store", b)
			} else {
				t.Log(err)
			}
			if objs, err := s.List(t.Context(), "v2/"); err == nil {
				t.Fatalf("listed %v with a link out of the store", objs)
			}
		})
	}
}
