package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Run checks s, which must be empty.
func Run(t *testing.T, s backupstore.Store) {
	ctx := context.Background()
	payload := bytes.Repeat([]byte("etcd-snapshot-"), 5000)
	sum := backupstore.SHA256Hex(payload)

	t.Run("put verifies and get returns the bytes", func(t *testing.T) {
		obj, err := s.Put(ctx, "v2/Full-00000000-00000010-1", bytes.NewReader(payload), int64(len(payload)), sum)
		if err != nil {
			t.Fatal(err)
		}
		if obj.Size != int64(len(payload)) || obj.SHA256 != sum {
			t.Fatalf("put returned %+v", obj)
		}
		r, err := s.Get(ctx, "v2/Full-00000000-00000010-1")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("got %d bytes back, want %d", len(got), len(payload))
		}
	})
	t.Run("put with a wrong checksum leaves no object", func(t *testing.T) {
		_, err := s.Put(ctx, "v2/Full-00000000-00000011-1", bytes.NewReader(payload), int64(len(payload)), strings.Repeat("0", 64))
		var verr *backupstore.VerifyError
		if !errors.As(err, &verr) {
			t.Fatalf("put with a wrong checksum: %v, want a VerifyError", err)
		}
		if _, err := s.Stat(ctx, "v2/Full-00000000-00000011-1"); !errors.Is(err, backupstore.ErrNotFound) {
			t.Fatalf("stat after a failed put (%v): %v, want ErrNotFound", verr, err)
		}
	})
	t.Run("put with a short reader leaves no object", func(t *testing.T) {
		_, err := s.Put(ctx, "v2/Full-00000000-00000012-1", bytes.NewReader(payload[:100]), int64(len(payload)), sum)
		if err == nil {
			t.Fatal("short put succeeded")
		}
		if _, err := s.Stat(ctx, "v2/Full-00000000-00000012-1"); !errors.Is(err, backupstore.ErrNotFound) {
			t.Fatalf("stat after a failed put : %v, want ErrNotFound", err)
		}
	})
	t.Run("list by prefix, delete", func(t *testing.T) {
		small := []byte("delta")
		for _, k := range []string{"v2/Incr-00000011-00000020-2", "other/x"} {
			if _, err := s.Put(ctx, k, bytes.NewReader(small), int64(len(small)), backupstore.SHA256Hex(small)); err != nil {
				t.Fatal(err)
			}
		}
		objs, err := s.List(ctx, "v2/")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		if strings.Join(keys, ",") != "v2/Full-00000000-00000010-1,v2/Incr-00000011-00000020-2" {
			t.Fatalf("list v2/ = %v", keys)
		}
		if err := s.Delete(ctx, "v2/Incr-00000011-00000020-2"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "v2/Incr-00000011-00000020-2"); err != nil {
			t.Fatalf("deleting a missing object: %v", err)
		}
		if _, err := s.Get(ctx, "v2/Incr-00000011-00000020-2"); !errors.Is(err, backupstore.ErrNotFound) {
			t.Fatalf("get after delete: %v, want ErrNotFound", err)
		}
	})
}
