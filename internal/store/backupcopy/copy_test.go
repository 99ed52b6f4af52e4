package backupcopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore/storetest"
)

var fast = backupstore.Backoff{Attempts: 4, Initial: time.Millisecond, Max: 2 * time.Millisecond}

// localStore is a Local store in its own temporary directory.
func localStore(t *testing.T) *backupstore.Local {
	t.Helper()
	s, err := backupstore.NewLocal(t.TempDir(), "bucket", "prefix")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// put writes content under key; recordSum false writes it as another tool would, with no
// checksum recorded.
func put(t *testing.T, s backupstore.Store, key, content string, recordSum bool) {
	t.Helper()
	sum := ""
	if recordSum {
		sum = backupstore.SHA256Hex([]byte(content))
	}
	if _, err := s.Put(context.Background(), key, strings.NewReader(content), int64(len(content)), sum); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, s backupstore.Store, key string) (string, error) {
	t.Helper()
	r, err := s.Get(context.Background(), key)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

// sourceChain fills s with two backups, their records, the store claim and a chunk part, and
// returns what the target must hold afterwards (key → content).
func sourceChain(t *testing.T, s backupstore.Store) map[string]string {
	f1, d1, f2 := full(10, 0), delta(11, 20, 0), full(20, 1)
	final := full(30, 2)
	final.Final = true
	d2 := delta(21, 30, 1)
	want := map[string]string{
		f1.Key(): "full one", snapshot.FullMetaKey(f1): `{"format":"x"}`, d1.Key(): "delta one",
		f2.Key(): "full two", d2.Key(): "delta two",
	}
	for k, v := range want {
		put(t, s, k, v, true)
	}
	// etcd-backup-restore's final snapshot, without a recorded checksum, lands without ".final".
	put(t, s, final.Key(), strings.Repeat("final", 1000), false)
	nonFinal := final
	nonFinal.Final = false
	want[nonFinal.Key()] = strings.Repeat("final", 1000)
	put(t, s, snapshot.OwnerKey, `{"etcd":"ns/old"}`, true)
	put(t, s, full(99, 3).Key()+"/1", "chunk of an unfinished upload", true)
	return want
}

func targetKeys(t *testing.T, s backupstore.Store) []string {
	t.Helper()
	var keys []string
	for _, p := range []string{"v2/", snapshot.MetaDir} {
		objs, err := s.List(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
	}
	return keys
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	t.Run("copies every backup and record, verified, but not the claim", func(t *testing.T) {
		src, dst := localStore(t), localStore(t)
		want := sourceChain(t, src)
		res, err := Run(ctx, src, dst, Filter{}, Limits{}, fast, testr.New(t))
		if err != nil {
			t.Fatal(err)
		}
		if res.Backups != 3 || res.Copied != len(want) || res.Skipped != 0 {
			t.Errorf("result %v, want 3 backups, %d copied, 0 skipped", res, len(want))
		}
		if keys := targetKeys(t, dst); len(keys) != len(want) {
			t.Errorf("target holds %v, want %d objects", keys, len(want))
		}
		for k, v := range want {
			got, err := read(t, dst, k)
			if err != nil || got != v {
				t.Errorf("target %s = %q, %v; want %q", k, got, err, v)
			}
			obj, err := dst.Stat(ctx, k)
			if err != nil || obj.SHA256 != backupstore.SHA256Hex([]byte(v)) {
				t.Errorf("target %s records sha256 %q, %v; want the content's", k, obj.SHA256, err)
			}
		}
		if _, err := dst.Stat(ctx, snapshot.OwnerKey); !errors.Is(err, backupstore.ErrNotFound) {
			t.Errorf("the store claim reached the target (%v): the Etcd using it could not claim it", err)
		}
	})

	t.Run("resumes: what the target holds is skipped, a different object replaced", func(t *testing.T) {
		src, dst := localStore(t), localStore(t)
		want := sourceChain(t, src)
		f1, d1 := full(10, 0), delta(11, 20, 0)
		put(t, dst, f1.Key(), want[f1.Key()], true)
		put(t, dst, d1.Key(), want[d1.Key()], false) // copied by another tool: hashed to compare
		put(t, dst, full(20, 1).Key(), "a different full two", true)
		res, err := Run(ctx, src, dst, Filter{}, Limits{}, fast, testr.New(t))
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped != 2 || res.Copied != len(want)-2 {
			t.Errorf("result %v, want 2 skipped, %d copied", res, len(want)-2)
		}
		if got, _ := read(t, dst, full(20, 1).Key()); got != want[full(20, 1).Key()] {
			t.Errorf("the different object in the target was kept: %q", got)
		}
		again, err := Run(ctx, src, dst, Filter{}, Limits{}, fast, testr.New(t))
		if err != nil || again.Copied != 0 || again.Skipped != len(want) {
			t.Errorf("second run %v, %v; want everything skipped", again, err)
		}
	})

	t.Run("transient store errors are retried", func(t *testing.T) {
		src, dst := localStore(t), localStore(t)
		want := sourceChain(t, src)
		flaky := storetest.Flaky(dst, 3)
		res, err := Run(ctx, storetest.Flaky(src, 2), flaky, Filter{}, Limits{}, fast, testr.New(t))
		if err != nil {
			t.Fatal(err)
		}
		if res.Copied != len(want) {
			t.Errorf("result %v, want %d copied", res, len(want))
		}
	})

	t.Run("a corrupt source object is a permanent error and is not copied", func(t *testing.T) {
		root := t.TempDir()
		src, err := backupstore.NewLocal(root, "bucket", "prefix")
		if err != nil {
			t.Fatal(err)
		}
		dst := localStore(t)
		f1 := full(10, 0)
		put(t, src, f1.Key(), "full one", true)
		// The bytes change after the checksum was recorded: bit rot, a torn write.
		if err := os.WriteFile(filepath.Join(root, "bucket", "prefix", filepath.FromSlash(f1.Key())), []byte("full 0ne"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = Run(ctx, src, dst, Filter{}, Limits{}, fast, testr.New(t))
		if err == nil || !Permanent(err) {
			t.Fatalf("error %v, want a permanent one", err)
		}
		if _, err := dst.Stat(ctx, f1.Key()); !errors.Is(err, backupstore.ErrNotFound) {
			t.Errorf("the corrupt object reached the target (%v)", err)
		}
	})

	t.Run("an object larger than the limit is refused before it is read, permanently", func(t *testing.T) {
		root := t.TempDir()
		src, err := backupstore.NewLocal(root, "bucket", "prefix")
		if err != nil {
			t.Fatal(err)
		}
		dst := localStore(t)
		small, huge := full(1, 0), full(7, 0)
		put(t, src, small.Key(), "small", true)
		// A sparse file of 64 MiB: its size is all the source says of it.
		put(t, src, huge.Key(), "x", true)
		if err := os.Truncate(filepath.Join(root, "bucket", "prefix", filepath.FromSlash(huge.Key())), 64<<20); err != nil {
			t.Fatal(err)
		}
		res, err := Run(ctx, src, dst, Filter{}, Limits{MaxObjectBytes: 1 << 20}, fast, testr.New(t))
		var large *TooLargeError
		if !errors.As(err, &large) || !Permanent(err) || large.Size != 64<<20 || !strings.Contains(err.Error(), huge.Key()) {
			t.Fatalf("error %v, want a permanent TooLargeError naming %s", err, huge.Key())
		}
		if _, err := dst.Stat(ctx, huge.Key()); !errors.Is(err, backupstore.ErrNotFound) {
			t.Errorf("the huge object reached the target (%v)", err)
		}
		if res.Copied != 1 {
			t.Errorf("result %v: the object below the limit, copied first, should be there", res)
		}
	})

	t.Run("objects are streamed: a large one copies whole", func(t *testing.T) {
		src, dst := localStore(t), localStore(t)
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
		f := full(5, 0)
		if _, err := src.Put(ctx, f.Key(), bytes.NewReader(big), int64(len(big)), backupstore.SHA256Hex(big)); err != nil {
			t.Fatal(err)
		}
		res, err := Run(ctx, src, dst, Filter{}, Limits{}, fast, testr.New(t))
		if err != nil || res.Bytes != int64(len(big)) {
			t.Fatalf("result %v, %v; want %d bytes", res, err, len(big))
		}
	})
}

func TestPermanent(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"verify", &backupstore.VerifyError{Key: "k", What: "sha256"}, true},
		{"gone", backupstore.ErrNotFound, true},
		{"too large", fmt.Errorf("copying: %w", &TooLargeError{Key: "k", Size: 2, Max: 1}), true},
		{"unreachable", storetest.ErrInjected, false},
		{"context", context.DeadlineExceeded, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Permanent(tt.err); got != tt.want {
				t.Errorf("Permanent(%v) = %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}
