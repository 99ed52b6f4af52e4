package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// asideInfix joins a data dir's name and the time it was set aside:
	// <dir>.aside-20261126T101500Z, then -2, -3, ... when that name is taken.
	asideInfix  = ".aside-"
	asideLayout = "20060102T150405Z"
	// maxAsideNames bounds the names tried for one second.
	maxAsideNames = 100
)

// Aside is a data dir kept aside.
type Aside struct {
	Path string
	// Time is when it was set aside, from its name (the directory's modification time for a
	// name that holds no time).
	Time time.Time
	// Bytes is the size of the regular files in it.
	Bytes int64
}

// MoveAside renames the directory dir to the sibling <dir>.aside-<now in UTC>, never over
// anything that exists (a taken name gets -2, -3, ...), makes the rename durable (fsync of the
// parent) and returns the new path. Nothing is copied or deleted.
func MoveAside(dir string, now time.Time) (string, error) {
	dir = filepath.Clean(dir)
	info, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("moving %s aside: %w", dir, err)
	}
	// A directory is never renamed over anything: os.Rename refuses an existing directory
	// as the target, and the kernel refuses a file (ENOTDIR) or a directory that is not
	// empty (ENOTEMPTY) should one appear in between.
	if !info.IsDir() {
		return "", fmt.Errorf("moving %s aside: it is a %s, not a directory", dir, kind(info.Mode()))
	}
	base := dir + asideInfix + now.UTC().Format(asideLayout)
	for n := 1; n <= maxAsideNames; n++ {
		target := base
		if n > 1 {
			target = fmt.Sprintf("%s-%d", base, n)
		}
		if _, err := os.Lstat(target); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("moving %s aside: %w", dir, err)
		}
		err := os.Rename(dir, target)
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.ENOTDIR) {
			// Taken meanwhile.
			continue
		}
		if err != nil {
			return "", fmt.Errorf("moving %s aside to %s: %w", dir, target, err)
		}
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return target, fmt.Errorf("moved %s aside to %s, but syncing the parent directory: %w", dir, target, err)
		}
		return target, nil
	}
	return "", fmt.Errorf("moving %s aside: %s and %d more names are taken", dir, base, maxAsideNames-1)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ListAside lists the data dirs MoveAside set aside from dir (and those the init step named
// <dir>.aside-<Unix seconds> before), oldest first.
func ListAside(dir string) ([]Aside, error) {
	dir = filepath.Clean(dir)
	parent, prefix := filepath.Dir(dir), filepath.Base(dir)+asideInfix
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Aside
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		a := Aside{Path: filepath.Join(parent, e.Name())}
		var modTime time.Time
		a.Bytes, modTime, err = sizeOf(a.Path)
		if errors.Is(err, fs.ErrNotExist) {
			// Gone while listed.
			continue
		}
		if err != nil {
			return nil, err
		}
		if a.Time, ok = asideTime(suffix); !ok {
			a.Time = modTime
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Aside) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out, nil
}

// asideTime reads the time in an aside name's suffix: MoveAside's layout with an optional -N,
// or Unix seconds.
func asideTime(suffix string) (time.Time, bool) {
	if i := strings.LastIndexByte(suffix, '-'); i > 0 {
		if _, err := strconv.Atoi(suffix[i+1:]); err == nil {
			suffix = suffix[:i]
		}
	}
	if t, err := time.Parse(asideLayout, suffix); err == nil {
		return t, true
	}
	if s, err := strconv.ParseInt(suffix, 10, 64); err == nil && s > 0 {
		return time.Unix(s, 0).UTC(), true
	}
	return time.Time{}, false
}

// sizeOf sums the sizes of the regular files under path (symbolic links are not followed) and
// returns path's modification time.
func sizeOf(path string) (int64, time.Time, error) {
	var size int64
	var modTime time.Time
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if p == path {
			modTime = info.ModTime()
		}
		if info.Mode().IsRegular() {
			size += info.Size()
		}
		return nil
	})
	return size, modTime, err
}
