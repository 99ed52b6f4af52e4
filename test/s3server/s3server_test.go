package s3server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore/storetest"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
)

// TestS3StoreAgainstVersitygw runs the store behaviour against a real S3 server, then stops
// the server (the store must fail, not hang) and starts it again (the data is still there).
func TestS3StoreAgainstVersitygw(t *testing.T) {
	srv := s3server.StartT(t, "", "backups")
	s, err := backupstore.New(backupstore.Config{Provider: "aws", Container: "backups", Prefix: "shoot/etcd-main/", Secret: srv.SecretData()})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, s)

	ctx := context.Background()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = s.List(ctx, "v2/")
	if err == nil || !backupstore.IsUnreachable(err) {
		t.Fatalf("list with the server stopped: %v, want an unreachable error", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(ctx, "v2/")
	if err != nil || len(objs) != 1 {
		t.Fatalf("after restart: %v %v", objs, err)
	}

	t.Run("wrong credentials are not unreachable", func(t *testing.T) {
		data := srv.SecretData()
		data[backupstore.KeySecretAccessKey] = []byte("wrong")
		bad, err := backupstore.New(backupstore.Config{Provider: "aws", Container: "backups", Secret: data})
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.List(ctx, "v2/")
		if err == nil || backupstore.IsUnreachable(err) || errors.Is(err, backupstore.ErrNotFound) {
			t.Fatalf("list with a wrong secret: %v", err)
		}
	})
}

// TestThrottleRefusesThenLifts: behind the throttle, the matching reads after the allowed ones
// are refused (503 SlowDown, through the real S3 client), everything else passes, and once it
// is lifted the same read succeeds: a store that is slow, not one that lost the object.
func TestThrottleRefusesThenLifts(t *testing.T) {
	srv := s3server.StartT(t, "", "backups")
	throttle, err := s3server.NewThrottle(srv, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { throttle.Close() })
	s, err := backupstore.New(backupstore.Config{Provider: "S3", Container: "backups", Prefix: "p/", Secret: throttle.SecretData()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"v2/Full-1", "v2/Incr-2"} {
		body := []byte("content of " + key)
		if _, err := s.Put(ctx, key, bytes.NewReader(body), int64(len(body)), backupstore.SHA256Hex(body)); err != nil {
			t.Fatalf("put %s through the throttle: %v", key, err)
		}
	}
	throttle.SlowDown(func(key, _ string) bool { return strings.Contains(key, "Incr-") }, 1)
	read := func(key string) error {
		r, err := s.Get(ctx, key)
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = io.ReadAll(r)
		return err
	}
	if err := read("v2/Incr-2"); err != nil {
		t.Fatalf("the allowed read: %v", err)
	}
	if err := read("v2/Incr-2"); err == nil || errors.Is(err, backupstore.ErrNotFound) {
		t.Fatalf("a throttled read: %v, want an error that is not 'not found'", err)
	}
	if err := read("v2/Full-1"); err != nil {
		t.Fatalf("a read the throttle does not match: %v", err)
	}
	if objs, err := s.List(ctx, "v2/"); err != nil || len(objs) != 2 {
		t.Fatalf("listing while throttled: %v %v", objs, err)
	}
	// The S3 client retries a SlowDown itself before it gives up: one read, several refusals.
	if throttle.Refused() < 1 {
		t.Fatalf("refused %d reads, want at least 1", throttle.Refused())
	}
	throttle.Lift()
	if err := read("v2/Incr-2"); err != nil {
		t.Fatalf("after the lift: %v", err)
	}
}
