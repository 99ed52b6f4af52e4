package backupcopy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/go-logr/logr"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Result is what a run did.
type Result struct {
	// Backups is the number of backups (full snapshots) chosen.
	Backups int
	// Copied are the objects written to the target, Skipped those it already held (same size
	// and SHA-256), Bytes what was written.
	Copied, Skipped int
	Bytes           int64
}

func (r Result) String() string {
	return fmt.Sprintf("%d backups: %d objects copied (%d bytes), %d already in the target", r.Backups, r.Copied, r.Bytes, r.Skipped)
}

// TooLargeError is a source object larger than the run's limit (Limits.MaxObjectBytes): refused
// before a byte of it is read, so a source that claims a huge object costs the copier nothing.
type TooLargeError struct {
	Key       string
	Size, Max int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("source object %s is %d bytes, more than the %d bytes a copy takes (backupStores.maxCopyObjectBytes)", e.Key, e.Size, e.Max)
}

// Permanent says whether a run's error will not go away by running again: an object that is not
// what its store recorded (a *backupstore.VerifyError, on either side), that disappeared from
// the source while it was copied, or that is larger than the limit. Any other error (the store
// unreachable, throttling, the context ending) is worth another run, which skips what is already
// copied.
func Permanent(err error) bool {
	var verr *backupstore.VerifyError
	var large *TooLargeError
	return errors.As(err, &verr) || errors.As(err, &large) || errors.Is(err, backupstore.ErrNotFound)
}

// DefaultMaxObjectBytes is the largest object a copy takes when its caller sets no limit: 64 GiB,
// eight times etcd's largest advised database (8 GiB).
const DefaultMaxObjectBytes = int64(64) << 30

// Limits bound what one run may cost the process that runs it.
type Limits struct {
	// MaxObjectBytes is the largest object copied, as the source reports its size (listing and
	// Stat) and as it streams (the store's check on read stops at the reported size); larger is a
	// *TooLargeError. 0: DefaultMaxObjectBytes.
	MaxObjectBytes int64
}

func (l Limits) maxObjectBytes() int64 {
	if l.MaxObjectBytes > 0 {
		return l.MaxObjectBytes
	}
	return DefaultMaxObjectBytes
}

// Run copies the backups f selects from src to dst, each object streamed (the memory it takes
// does not grow with an object's size: see backupstore.S3's part size). Reads (List, Stat, Get)
// and each object's write are retried on transient errors within b; the first error that
// outlasts them ends the run, with what was done so far in the Result. An object larger than
// lim allows ends it before anything of it is read.
func Run(ctx context.Context, src, dst backupstore.Store, f Filter, lim Limits, b backupstore.Backoff, log logr.Logger) (Result, error) {
	src, dst = backupstore.Retrying(src, b), backupstore.Retrying(dst, b)
	var listed []backupstore.Object
	for _, prefix := range []string{snapshot.Dir, snapshot.MetaDir} {
		objs, err := src.List(ctx, prefix)
		if err != nil {
			return Result{}, fmt.Errorf("listing the source %s: %w", src, err)
		}
		listed = append(listed, objs...)
	}
	sel := Select(listed, f)
	for key, why := range sel.Left {
		log.V(1).Info("Not copied", "key", key, "why", why)
	}
	res := Result{Backups: sel.Backups}
	c := copier{src: src, dst: dst, backoff: b, log: log, maxBytes: lim.maxObjectBytes()}
	for _, it := range sel.Items {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		copied, n, err := c.one(ctx, it)
		if err != nil {
			return res, fmt.Errorf("copying %s to %s as %s: %w", it.Source, dst, it.Target, err)
		}
		if copied {
			res.Copied++
			res.Bytes += n
		} else {
			res.Skipped++
		}
	}
	return res, nil
}

type copier struct {
	src, dst backupstore.Store
	backoff  backupstore.Backoff
	log      logr.Logger
	maxBytes int64
}

// one copies one object unless the target already holds it; copied is false when skipped.
func (c copier) one(ctx context.Context, it Item) (copied bool, n int64, err error) {
	// The listed size first: an object listed too large is not even asked about.
	if it.Size > c.maxBytes {
		return false, 0, &TooLargeError{Key: it.Source, Size: it.Size, Max: c.maxBytes}
	}
	want, err := c.src.Stat(ctx, it.Source)
	if err != nil {
		return false, 0, fmt.Errorf("source: %w", err)
	}
	if want.Size > c.maxBytes {
		return false, 0, &TooLargeError{Key: it.Source, Size: want.Size, Max: c.maxBytes}
	}
	// An object another tool wrote (etcd-backup-restore) has no recorded checksum: hash it as
	// stored, streaming, so the write below is checked against it.
	if want.SHA256 == "" {
		if want.SHA256, want.Size, err = digest(ctx, c.src, it.Source); err != nil {
			return false, 0, fmt.Errorf("source: %w", err)
		}
	}
	if have, err := c.dst.Stat(ctx, it.Target); err == nil {
		if have.Size == want.Size {
			sum := have.SHA256
			if sum == "" {
				if sum, _, err = digest(ctx, c.dst, it.Target); err != nil {
					return false, 0, fmt.Errorf("target: %w", err)
				}
			}
			if sum == want.SHA256 {
				c.log.V(1).Info("Already in the target", "key", it.Target, "bytes", have.Size)
				return false, 0, nil
			}
		}
		// Same name, other content: the target is to be a copy of the source, so the source's
		// object replaces it (Put is whole-or-nothing).
		c.log.Info("Replacing a different object in the target", "key", it.Target, "bytes", have.Size, "sha256", have.SHA256, "wantSHA256", want.SHA256)
	} else if !errors.Is(err, backupstore.ErrNotFound) {
		return false, 0, fmt.Errorf("target: %w", err)
	}

	if err := c.put(ctx, it, want); err != nil {
		return false, 0, err
	}
	// Read it back: Put checked the stream and the stored size and checksum as the store reports
	// them; this checks the bytes a restore will read.
	sum, size, err := digest(ctx, c.dst, it.Target)
	if err != nil {
		return false, 0, fmt.Errorf("reading back the copy: %w", err)
	}
	if size != want.Size || sum != want.SHA256 {
		return false, 0, &backupstore.VerifyError{Key: it.Target, What: "copy (size/sha256)",
			Want: fmt.Sprintf("%d/%s", want.Size, want.SHA256), Have: fmt.Sprintf("%d/%s", size, sum)}
	}
	c.log.Info("Copied", "key", it.Target, "bytes", size)
	return true, size, nil
}

// put streams the source object into the target, trying again from the start on a transient
// error: a Put consumes its reader, so each try opens the source again.
func (c copier) put(ctx context.Context, it Item, want backupstore.Object) error {
	_, err := backupstore.Retry(ctx, c.backoff, func() (struct{}, error) {
		r, err := c.src.Get(ctx, it.Source)
		if err != nil {
			return struct{}{}, fmt.Errorf("source: %w", err)
		}
		defer r.Close()
		if _, err := c.dst.Put(ctx, it.Target, r, want.Size, want.SHA256); err != nil {
			return struct{}{}, fmt.Errorf("target: %w", err)
		}
		return struct{}{}, nil
	})
	return err
}

// digest reads an object through and returns its SHA-256 (hex) and size; the store's own check
// on read (Get) applies on the way.
func digest(ctx context.Context, s backupstore.Store, key string) (string, int64, error) {
	r, err := s.Get(ctx, key)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", key, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
