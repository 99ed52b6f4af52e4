package backup

import (
	"context"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Fill writes 64 KiB values until the keyspace holds mib MiB (from the filled MiB already
// written) and returns the new total.
func Fill(ctx context.Context, tb testing.TB, kv pb.KVClient, filled, mib int) int {
	tb.Helper()
	value := make([]byte, 64<<10)
	for i := range value {
		value[i] = byte(i * 7)
	}
	for n := filled * 16; n < mib*16; n++ {
		if _, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "bench/%06d", n), Value: value}); err != nil {
			tb.Fatalf("filling the keyspace to %d MiB: %v", mib, err)
		}
	}
	return mib
}
