package backupstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore/storetest"
)

// fast is a backoff for tests: three tries, milliseconds apart.
var fast = backupstore.Backoff{Attempts: 3, Initial: time.Millisecond, Max: 2 * time.Millisecond}

// localWithObject is a Local store in a temp dir holding one object, "v2/Full-1".
func localWithObject(t *testing.T) (backupstore.Store, []byte) {
	t.Helper()
	s, err := backupstore.NewLocal(t.TempDir(), "backups", "etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a full snapshot")
	if _, err := s.Put(context.Background(), "v2/Full-1", bytes.NewReader(data), int64(len(data)), backupstore.SHA256Hex(data)); err != nil {
		t.Fatal(err)
	}
	return s, data
}

// TestRetryingRidesOutTransientFailures: each call of a Retrying store over a Local store whose
// first calls fail succeeds while the failures fit in the attempts, and gives up with the last
// error after the attempts otherwise; errors that another try cannot change end at once.
func TestRetryingRidesOutTransientFailures(t *testing.T) {
	calls := map[string]func(context.Context, backupstore.Store) error{
		"list": func(ctx context.Context, s backupstore.Store) error {
			objs, err := s.List(ctx, "v2/")
			if err == nil && len(objs) != 1 {
				return fmt.Errorf("listed %v, want the one object", objs)
			}
			return err
		},
		"stat": func(ctx context.Context, s backupstore.Store) error {
			_, err := s.Stat(ctx, "v2/Full-1")
			return err
		},
		"get": func(ctx context.Context, s backupstore.Store) error {
			r, err := s.Get(ctx, "v2/Full-1")
			if err != nil {
				return err
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err == nil && string(got) != "a full snapshot" {
				return fmt.Errorf("read %q", got)
			}
			return err
		},
	}
	tests := []struct {
		name      string
		failures  int
		err       error
		wantCalls int
		want      func(error) bool
	}{
		{"no failure", 0, storetest.ErrInjected, 1, isNil},
		{"failures within the attempts", 2, storetest.ErrInjected, 3, isNil},
		{"failures beyond the attempts", 5, storetest.ErrInjected, 3, is(storetest.ErrInjected)},
		{"a missing object is not retried", 5, fmt.Errorf("stat: %w", backupstore.ErrNotFound), 1, is(backupstore.ErrNotFound)},
		{"a corrupt object is not retried", 5, &backupstore.VerifyError{Key: "v2/Full-1", What: "sha256"}, 1, isVerifyError},
		{"a context end is not retried", 5, context.DeadlineExceeded, 1, is(context.DeadlineExceeded)},
	}
	for op, call := range calls {
		for _, tt := range tests {
			t.Run(op+"/"+tt.name, func(t *testing.T) {
				local, _ := localWithObject(t)
				flaky := storetest.FlakyWith(local, tt.failures, tt.err)
				err := call(context.Background(), backupstore.Retrying(flaky, fast))
				if !tt.want(err) {
					t.Errorf("error %v", err)
				}
				if flaky.Calls() != tt.wantCalls {
					t.Errorf("%d calls, want %d", flaky.Calls(), tt.wantCalls)
				}
			})
		}
	}
}

func TestRetryingPassesPutAndDeleteThrough(t *testing.T) {
	local, data := localWithObject(t)
	flaky := storetest.Flaky(local, 2)
	s := backupstore.Retrying(flaky, fast)
	if _, err := s.Put(context.Background(), "v2/Full-2", bytes.NewReader(data), int64(len(data)), backupstore.SHA256Hex(data)); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("put: %v, want the injected failure, not retried", err)
	}
	if err := s.Delete(context.Background(), "v2/Full-1"); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("delete: %v, want the injected failure, not retried", err)
	}
	if flaky.Calls() != 2 {
		t.Errorf("%d calls, want 2", flaky.Calls())
	}
}

// TestRetryingStopsWhenTheContextEnds: a caller that gives up is not held for the backoff.
func TestRetryingStopsWhenTheContextEnds(t *testing.T) {
	local, _ := localWithObject(t)
	flaky := storetest.Flaky(local, 100)
	s := backupstore.Retrying(flaky, backupstore.Backoff{Attempts: 10, Initial: time.Hour, Max: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.List(ctx, "v2/")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("returned after %s", took)
	}
	if !errors.Is(err, storetest.ErrInjected) || !errors.Is(err, context.DeadlineExceeded) || flaky.Calls() != 1 {
		t.Errorf("error %v after %d calls, want the injected failure and the deadline, after 1 call", err, flaky.Calls())
	}
}

func TestBackoffDelay(t *testing.T) {
	b := backupstore.DefaultBackoff
	for _, tt := range []struct {
		attempt int
		want    time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 16 * time.Second}, {6, 30 * time.Second}, {60, 30 * time.Second}} {
		t.Run(fmt.Sprint(tt.attempt), func(t *testing.T) {
			if got := b.Delay(tt.attempt); got != tt.want {
				t.Errorf("delay after attempt %d: %s, want %s", tt.attempt, got, tt.want)
			}
		})
	}
}

func isNil(err error) bool { return err == nil }

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func isVerifyError(err error) bool {
	var verr *backupstore.VerifyError
	return errors.As(err, &verr)
}
