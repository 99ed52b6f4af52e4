package restore

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheckFreeSpace(t *testing.T) {
	tmp := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(tmp, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	tests := []struct {
		name    string
		dir     string
		need    int64
		short   bool
		measure string
	}{
		{"nothing needed", tmp, 0, false, tmp},
		{"less than free", tmp, free / 2, false, tmp},
		{"more than the volume has", tmp, free + 1<<40, true, tmp},
		{"a data dir not created yet is measured on its nearest ancestor", filepath.Join(tmp, "new.etcd", "member"), 1 << 62, true, tmp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckFreeSpace(tt.dir, tt.need)
			var serr *InsufficientSpaceError
			switch {
			case !tt.short && err != nil:
				t.Fatalf("CheckFreeSpace(%s, %d): %v, want enough (about %d free)", tt.dir, tt.need, err, free)
			case tt.short && !errors.As(err, &serr):
				t.Fatalf("CheckFreeSpace(%s, %d): %v, want an InsufficientSpaceError", tt.dir, tt.need, err)
			case tt.short:
				// Other writers change the free space between the two looks: roughly the same.
				if serr.Dir != tt.measure || serr.Need != tt.need || serr.Free <= 0 || serr.Free > free+1<<30 {
					t.Errorf("error %+v, want %s measured, need %d, about %d free", serr, tt.measure, tt.need, free)
				}
				if msg := serr.Error(); !strings.Contains(msg, "restore needs") || !strings.Contains(msg, "free") {
					t.Errorf("message %q says not what is needed and what is free", msg)
				}
			}
		})
	}
}

func TestHumanBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {3 << 29, "1.5 GiB"}, {1 << 62, "4.0 EiB"}} {
		t.Run(tt.want, func(t *testing.T) {
			if got := humanBytes(tt.n); got != tt.want {
				t.Errorf("humanBytes(%d) = %q, want %q", tt.n, got, tt.want)
			}
		})
	}
}
