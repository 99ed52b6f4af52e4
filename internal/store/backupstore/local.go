package backupstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// checksumSuffix names the file beside each object that holds its SHA-256, written before the
// object is renamed into place.
const checksumSuffix = ".sha256"

// tmpPrefix starts the name of a file being written; List never shows one.
const tmpPrefix = ".tmp-"

// Local is a store in a directory: <root>/<container>/<prefix>/<key>. A Put writes a temporary
// file, syncs it and renames it into place, so an object is never seen half-written.
type Local struct {
	dir  string
	name string
}

var _ Store = (*Local)(nil)

// NewLocal creates the store's directory if needed.
func NewLocal(root, container, prefix string) (*Local, error) {
	for _, part := range []string{container, prefix} {
		if strings.Contains(part, "..") {
			return nil, fmt.Errorf("local backup store: %q must not contain ..", part)
		}
	}
	dir := filepath.Join(root, container, prefix)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("local backup store: %w", err)
	}
	return &Local{dir: dir, name: fmt.Sprintf("Local %s (prefix %q)", filepath.Join(root, container), prefix)}, nil
}

func (l *Local) String() string { return l.name }

func (l *Local) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("invalid object key %q", key)
	}
	return filepath.Join(l.dir, filepath.FromSlash(key)), nil
}

func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, sha256Hex string) (Object, error) {
	path, err := l.path(key)
	if err != nil {
		return Object{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return Object{}, fmt.Errorf("put %s: %w", key, err)
	}
	if err := writeAtomically(path+checksumSuffix, strings.NewReader(sha256Hex)); err != nil {
		return Object{}, fmt.Errorf("put %s: checksum: %w", key, err)
	}
	check := newCheckingReader(&ctxReader{ctx: ctx, r: r}, key, size, sha256Hex)
	if err := writeAtomically(path, check); err != nil {
		return Object{}, fmt.Errorf("put %s: %w", key, err)
	}
	obj, err := l.Stat(ctx, key)
	if err != nil {
		return Object{}, err
	}
	if obj.Size != size {
		return Object{}, &VerifyError{Key: key, What: "stored size", Want: fmt.Sprint(size), Have: fmt.Sprint(obj.Size)}
	}
	return obj, nil
}

// writeAtomically copies r into a temporary file beside path, syncs it and renames it to path.
func writeAtomically(path string, r io.Reader) (err error) {
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), tmpPrefix+filepath.Base(path)+"-"+hex.EncodeToString(suffix))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := l.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	path, _ := l.path(key)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return readCloser{Reader: newCheckingReader(f, key, obj.Size, obj.SHA256), Closer: f}, nil
}

func (l *Local) Stat(_ context.Context, key string) (Object, error) {
	path, err := l.path(key)
	if err != nil {
		return Object{}, err
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Object{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Object{}, fmt.Errorf("stat %s: %w", key, err)
	}
	sum, err := os.ReadFile(path + checksumSuffix)
	if err != nil {
		return Object{}, fmt.Errorf("stat %s: checksum: %w", key, err)
	}
	return Object{Key: key, Size: info.Size(), SHA256: strings.TrimSpace(string(sum)), LastModified: info.ModTime()}, nil
}

func (l *Local) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	err := filepath.WalkDir(l.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || strings.HasPrefix(name, tmpPrefix) || strings.HasSuffix(name, checksumSuffix) {
			return nil
		}
		rel, err := filepath.Rel(l.dir, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		obj, err := l.Stat(ctx, key)
		if err != nil {
			return err
		}
		out = append(out, obj)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (l *Local) Delete(_ context.Context, key string) error {
	path, err := l.path(key)
	if err != nil {
		return err
	}
	for _, p := range []string{path, path + checksumSuffix} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", key, err)
		}
	}
	return nil
}

// ctxReader stops a long copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
