package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"
)

// InsufficientSpaceError says the volume a restore writes to has less free space than the
// restore needs. Retrying does not help: the volume must grow (or be cleared) first.
type InsufficientSpaceError struct {
	// Dir is where the space was measured: the data dir, or its nearest existing ancestor.
	Dir string
	// Need and Free are bytes; Free is what an unprivileged writer may use (f_bavail).
	Need, Free int64
}

func (e *InsufficientSpaceError) Error() string {
	return fmt.Sprintf("restore needs %d bytes (%s), the volume of %s has %d bytes (%s) free",
		e.Need, humanBytes(e.Need), e.Dir, e.Free, humanBytes(e.Free))
}

// CheckFreeSpace fails with an *InsufficientSpaceError when the volume that holds dir has less
// than need bytes free. dir need not exist yet (a restore creates it): the nearest existing
// ancestor is measured, which is on the same volume unless a mount point lies in between.
func CheckFreeSpace(dir string, need int64) error {
	at, err := nearestExisting(dir)
	if err != nil {
		return fmt.Errorf("checking the free space for %s: %w", dir, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(at, &st); err != nil {
		return fmt.Errorf("checking the free space of %s: %w", at, err)
	}
	free := int64(math.MaxInt64)
	if bsize := uint64(st.Bsize); bsize > 0 && uint64(st.Bavail) <= math.MaxInt64/bsize {
		free = int64(uint64(st.Bavail) * bsize)
	}
	if free < need {
		return &InsufficientSpaceError{Dir: at, Need: need, Free: free}
	}
	return nil
}

// nearestExisting is dir or its closest ancestor that exists.
func nearestExisting(dir string) (string, error) {
	p, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		_, err := os.Stat(p)
		if err == nil {
			return p, nil
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, fs.ErrNotExist) || parent == p {
			return "", err
		}
		p = parent
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
