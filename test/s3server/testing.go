package s3server

import (
	"context"
	"testing"
)

// StartT starts a server for the test with a bucket (failing when versitygw is not built), and
// stops it when the test ends.
func StartT(t testing.TB, host, bucket string) *Server {
	t.Helper()
	s, err := New(Options{Host: host, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("S3 server: %v", err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Logf("stop s3server: %v", err)
		}
	})
	if bucket != "" {
		if err := s.CreateBucket(ctx, bucket); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
