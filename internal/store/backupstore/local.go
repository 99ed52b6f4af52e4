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
	"path"
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
//
// root is the boundary: every file is opened through an os.Root of it, so no symbolic link below
// it leads out. Whoever can write the store's directory (a member pod, for its own Etcd's
// directory) could otherwise plant a link to any file of whoever reads the store, the manager
// copying a task's backups included (its ServiceAccount token, another tenant's snapshots), and
// have it read back as an object. The caller passes the deepest directory it trusts: a member
// pod its mount of the Etcd's own host directory, the manager that Etcd's directory below an
// allowed root (resources.StoreConfig), never a directory pods can replace with a link.
type Local struct {
	root string
	dir  string // below root, slash-separated
	name string
}

var _ Store = (*Local)(nil)

// NewLocal creates the store's directory below root if needed.
func NewLocal(root, container, prefix string) (*Local, error) {
	for _, part := range []string{container, prefix} {
		if strings.Contains(part, "..") {
			return nil, fmt.Errorf("local backup store: %q must not contain ..", part)
		}
	}
	l := &Local{root: root, dir: path.Join(".", container, prefix), name: fmt.Sprintf("Local %s (prefix %q)", filepath.Join(root, container), prefix)}
	// The boundary and what leads to it are the caller's to trust; below it, the root's.
	err := os.MkdirAll(root, 0o750)
	if err == nil {
		err = l.within(func(r *os.Root) error { return r.MkdirAll(l.dir, 0o750) })
	}
	if err != nil {
		return nil, fmt.Errorf("local backup store: %w", err)
	}
	return l, nil
}

func (l *Local) String() string { return l.name }

// within runs f on an os.Root of l.root, opened for this call alone (a store holds no open
// descriptor between calls; a file f opens stays usable after it returns).
func (l *Local) within(f func(*os.Root) error) error {
	r, err := os.OpenRoot(l.root)
	if err != nil {
		return err
	}
	defer r.Close()
	return f(r)
}

func (l *Local) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("invalid object key %q", key)
	}
	return path.Join(l.dir, key), nil
}

func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, sha256Hex string) (Object, error) {
	name, err := l.path(key)
	if err != nil {
		return Object{}, err
	}
	err = l.within(func(root *os.Root) error {
		if err := root.MkdirAll(path.Dir(name), 0o750); err != nil {
			return err
		}
		if err := writeAtomically(root, name+checksumSuffix, strings.NewReader(sha256Hex)); err != nil {
			return fmt.Errorf("checksum: %w", err)
		}
		return writeAtomically(root, name, newCheckingReader(&ctxReader{ctx: ctx, r: r}, key, size, sha256Hex))
	})
	if err != nil {
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

// writeAtomically copies r into a temporary file beside name (below root), syncs it and renames
// it to name.
func writeAtomically(root *os.Root, name string, r io.Reader) (err error) {
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	tmp := path.Join(path.Dir(name), tmpPrefix+path.Base(name)+"-"+hex.EncodeToString(suffix))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = root.Remove(tmp)
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
	return root.Rename(tmp, name)
}

func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := l.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	name, _ := l.path(key)
	var f *os.File
	if err := l.within(func(r *os.Root) (err error) { f, err = r.Open(name); return err }); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return readCloser{Reader: newCheckingReader(f, key, obj.Size, obj.SHA256), Closer: f}, nil
}

func (l *Local) Stat(_ context.Context, key string) (Object, error) {
	var obj Object
	err := l.within(func(r *os.Root) (err error) { obj, err = l.stat(r, key); return err })
	return obj, err
}

// stat is Stat within an open root: List stats every object through the one root it walks.
func (l *Local) stat(r *os.Root, key string) (Object, error) {
	name, err := l.path(key)
	if err != nil {
		return Object{}, err
	}
	info, err := r.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return Object{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Object{}, fmt.Errorf("stat %s: %w", key, err)
	}
	sum, err := r.ReadFile(name + checksumSuffix)
	if err != nil {
		return Object{}, fmt.Errorf("stat %s: checksum: %w", key, err)
	}
	return Object{Key: key, Size: info.Size(), SHA256: strings.TrimSpace(string(sum)), LastModified: info.ModTime()}, nil
}

func (l *Local) List(_ context.Context, prefix string) ([]Object, error) {
	var out []Object
	err := l.within(func(r *os.Root) error {
		dir, err := fs.Sub(r.FS(), l.dir)
		if err != nil {
			return err
		}
		// Names in dir are the keys.
		return fs.WalkDir(dir, ".", func(key string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			base := d.Name()
			if d.IsDir() || strings.HasPrefix(base, tmpPrefix) || strings.HasSuffix(base, checksumSuffix) || !strings.HasPrefix(key, prefix) {
				return nil
			}
			obj, err := l.stat(r, key)
			if err != nil {
				return err
			}
			out = append(out, obj)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (l *Local) Delete(_ context.Context, key string) error {
	name, err := l.path(key)
	if err != nil {
		return err
	}
	return l.within(func(r *os.Root) error {
		for _, p := range []string{name, name + checksumSuffix} {
			if err := r.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("delete %s: %w", key, err)
			}
		}
		return nil
	})
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
