package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// ErrInjected is the transient failure a FlakyStore injects, as a store that is restarting or
// out of reach fails.
var ErrInjected = errors.New("injected store failure (connection reset)")

// FlakyStore is a real store whose first calls fail: a store that is briefly away.
type FlakyStore struct {
	backupstore.Store

	mu       sync.Mutex
	failures int
	err      error
	calls    int
}

// Flaky fails the first failures calls (of any method) with ErrInjected, then passes every call
// to s.
func Flaky(s backupstore.Store, failures int) *FlakyStore {
	return FlakyWith(s, failures, ErrInjected)
}

// FlakyWith fails the first failures calls with err.
func FlakyWith(s backupstore.Store, failures int, err error) *FlakyStore {
	return &FlakyStore{Store: s, failures: failures, err: err}
}

// Calls counts every call so far, failed or passed on.
func (f *FlakyStore) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *FlakyStore) fail(op, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls > f.failures {
		return nil
	}
	return fmt.Errorf("%s %s in %s (call %d): %w", op, key, f.Store, f.calls, f.err)
}

func (f *FlakyStore) Put(ctx context.Context, key string, r io.Reader, size int64, sha256Hex string) (backupstore.Object, error) {
	if err := f.fail("put", key); err != nil {
		return backupstore.Object{}, err
	}
	return f.Store.Put(ctx, key, r, size, sha256Hex)
}

func (f *FlakyStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := f.fail("get", key); err != nil {
		return nil, err
	}
	return f.Store.Get(ctx, key)
}

func (f *FlakyStore) Stat(ctx context.Context, key string) (backupstore.Object, error) {
	if err := f.fail("stat", key); err != nil {
		return backupstore.Object{}, err
	}
	return f.Store.Stat(ctx, key)
}

func (f *FlakyStore) List(ctx context.Context, prefix string) ([]backupstore.Object, error) {
	if err := f.fail("list", prefix); err != nil {
		return nil, err
	}
	return f.Store.List(ctx, prefix)
}

func (f *FlakyStore) Delete(ctx context.Context, key string) error {
	if err := f.fail("delete", key); err != nil {
		return err
	}
	return f.Store.Delete(ctx, key)
}
