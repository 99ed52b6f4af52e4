package s3server_test

import (
	"context"
	"errors"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/backupstore"
	"github.com/etcd-conductor/etcd-conductor/internal/backupstore/storetest"
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
