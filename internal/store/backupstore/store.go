package backupstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

// Store is an object store holding one Etcd's backups below its prefix.
type Store interface {
	// Put stores exactly size bytes from r under key, fails unless their SHA-256 (hex) is
	// sha256Hex, and verifies what the store then holds (size and checksum) before it returns.
	// The object appears whole or not at all: a failed Put leaves no object under key.
	Put(ctx context.Context, key string, r io.Reader, size int64, sha256Hex string) (Object, error)
	// Get reads the object. The reader fails at the end (instead of io.EOF) when the bytes read
	// do not match the size and checksum recorded at Put.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat describes the object; a missing one is an error wrapping ErrNotFound.
	Stat(ctx context.Context, key string) (Object, error)
	// List returns every object whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes the object; a missing one is no error.
	Delete(ctx context.Context, key string) error
	// String names the store for logs and messages (provider, container, prefix; no secret).
	String() string
}

// Object describes a stored object.
type Object struct {
	Key          string
	Size         int64
	SHA256       string
	LastModified time.Time
}

// ErrNotFound is wrapped by Stat and Get for a missing object.
var ErrNotFound = errors.New("object not found")

// VerifyError says an object is not what was written: a size or checksum mismatch.
type VerifyError struct {
	Key        string
	What       string
	Want, Have string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("object %s: %s is %s, want %s", e.Key, e.What, e.Have, e.Want)
}

// SHA256Hex is the checksum Put and Get use, over a whole byte slice.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// checkingReader counts and hashes what passes through and, at the end, compares with the
// expected size and checksum, returning a VerifyError instead of io.EOF on a mismatch.
type checkingReader struct {
	r         io.Reader
	key       string
	wantSize  int64
	wantSHA   string
	h         hash.Hash
	n         int64
	verifyErr error
}

func newCheckingReader(r io.Reader, key string, size int64, sha string) *checkingReader {
	return &checkingReader{r: r, key: key, wantSize: size, wantSHA: sha, h: sha256.New()}
}

func (c *checkingReader) Read(p []byte) (int, error) {
	if c.verifyErr != nil {
		return 0, c.verifyErr
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	// A mismatch withholds the bytes of this read: io.ReadFull and similar callers drop an
	// error that comes with the last bytes they asked for, and would commit the object.
	if c.n > c.wantSize {
		c.verifyErr = &VerifyError{Key: c.key, What: "size", Want: fmt.Sprint(c.wantSize), Have: fmt.Sprintf("more than %d", c.wantSize)}
		return 0, c.verifyErr
	}
	// Check as soon as the expected size is reached: a client that reads exactly size bytes
	// never asks again and would never see io.EOF.
	if c.n == c.wantSize || errors.Is(err, io.EOF) {
		if v := c.verify(); v != nil {
			c.verifyErr = v
			return 0, v
		}
	}
	return n, err
}

func (c *checkingReader) verify() error {
	if c.n != c.wantSize {
		return &VerifyError{Key: c.key, What: "size", Want: fmt.Sprint(c.wantSize), Have: fmt.Sprint(c.n)}
	}
	if c.wantSHA == "" {
		return nil
	}
	if have := hex.EncodeToString(c.h.Sum(nil)); have != c.wantSHA {
		return &VerifyError{Key: c.key, What: "sha256", Want: c.wantSHA, Have: have}
	}
	return nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
