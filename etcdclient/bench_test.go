package etcdclient_test

import (
	"context"
	"os"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
)

// BenchmarkQuerySteadyState measures a reconcile's etcd round against a warm pool and fails if
// it needed any TLS handshake.
func BenchmarkQuerySteadyState(b *testing.B) {
	if _, err := etcdtest.EtcdBinary(etcdtest.DefaultVersion); err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("etcd binary required under CI=true: %v", err)
		}
		b.Skipf("etcd binary not built: %v", err)
	}
	c := etcdtest.Start(b, etcdtest.Config{})
	p := etcdclient.NewPool(etcdclient.Options{})
	b.Cleanup(p.Close)
	ctx := context.Background()
	if _, err := p.Query(ctx, cluster, c.Client, c.Targets()); err != nil {
		b.Fatal(err)
	}
	warm := p.Handshakes()

	for b.Loop() {
		if _, err := p.Query(ctx, cluster, c.Client, c.Targets()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	handshakes := p.Handshakes() - warm
	b.ReportMetric(float64(handshakes)/float64(b.N), "handshakes/op")
	if handshakes != 0 {
		b.Fatalf("%d TLS handshakes in steady state, want 0", handshakes)
	}
}
