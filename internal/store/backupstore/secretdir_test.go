package backupstore

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadSecretDir(t *testing.T) {
	// The layout kubelet writes: keys are links into a timestamped dir behind ..data.
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_11_22")
	if err := os.Mkdir(ts, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "accessKeyID"), []byte("AK"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2026_11_22", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/accessKeyID", filepath.Join(dir, "accessKeyID")); err != nil {
		t.Fatal(err)
	}
	data, err := ReadSecretDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 1 || string(data["accessKeyID"]) != "AK" {
		t.Errorf("read %v, want only accessKeyID=AK", data)
	}
	if _, err := ReadSecretDir(t.TempDir()); err == nil {
		t.Error("an empty Secret dir must be an error")
	}
	if data, err := ReadSecretDir(""); err != nil || data != nil {
		t.Errorf("no dir: %v %v, want nothing", data, err)
	}
}
