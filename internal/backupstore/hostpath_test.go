package backupstore

import (
	"errors"
	"testing"
)

func TestLocalHostPath(t *testing.T) {
	tests := []struct {
		name, hostPath, want string
		wantErr              bool
	}{
		{"no key: etcd-druid's default", "", DefaultLocalHostPath, false},
		{"the Secret's key", "/var/backups", "/var/backups", false},
		{"the default itself", DefaultLocalHostPath, DefaultLocalHostPath, false},
		{"relative", "var/backups", "", true},
		{"dot-dot", "/var/backups/../etc", "", true},
		{"trailing slash", "/var/backups/", "", true},
		{"inside the default, where other Etcds' directories are", DefaultLocalHostPath + "/shoot/etcd-main", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := map[string][]byte{}
			if tt.hostPath != "" {
				secret[KeyHostPath] = []byte(tt.hostPath)
			}
			got, err := LocalHostPath(secret)
			var serr *SecretError
			switch {
			case tt.wantErr && (!errors.As(err, &serr) || serr.Key != KeyHostPath):
				t.Fatalf("LocalHostPath(%q) = %q, %v; want a SecretError for %s", tt.hostPath, got, err, KeyHostPath)
			case !tt.wantErr && (err != nil || got != tt.want):
				t.Fatalf("LocalHostPath(%q) = %q, %v; want %q", tt.hostPath, got, err, tt.want)
			}
		})
	}
}
