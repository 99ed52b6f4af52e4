package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// TestReadSecretDir reads a Secret volume as kubelet lays it out: keys are links into a
// timestamped directory behind ..data, which are no keys themselves.
func TestReadSecretDir(t *testing.T) {
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_11_22_12_00_00.123")
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"accessKeyID": "AKIA", "secretAccessKey": "s"} {
		if err := os.WriteFile(filepath.Join(ts, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"accessKeyID", "secretAccessKey"} {
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	data, err := backupstore.ReadSecretDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 2 || string(data["accessKeyID"]) != "AKIA" {
		t.Fatalf("read %v", data)
	}
	if _, err := backupstore.ReadSecretDir(t.TempDir()); err == nil {
		t.Fatal("an empty directory (an optional Secret that does not exist) read as a Secret")
	}
	if data, err := backupstore.ReadSecretDir(""); err != nil || data != nil {
		t.Fatalf("no Secret configured: %v %v", data, err)
	}
}

func TestStoreReason(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&backupstore.ProviderError{Provider: "floppy"}, memberlease.ReasonStoreInvalid},
		{fmt.Errorf("wrapped: %w", &backupstore.SecretError{Key: "accessKeyID"}), memberlease.ReasonStoreInvalid},
		{errors.New("dial tcp 10.0.0.1:7070: connect: connection refused"), memberlease.ReasonStoreUnreachable},
	} {
		if got := storeReason(tt.err); got != tt.want {
			t.Errorf("storeReason(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}
