package etcdclient

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// ReconnectParams is how a connection to a member comes back after a failure: exponential
// back-off from 100 ms, capped at maxDelay (gRPC's default cap of 120 s would hide a member that
// has returned), each attempt bounded by connectTimeout. The operator's member clients and the
// test instruments (test/workload) reconnect the same way.
func ReconnectParams(maxDelay, connectTimeout time.Duration) grpc.ConnectParams {
	return grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  100 * time.Millisecond,
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   maxDelay,
		},
		MinConnectTimeout: connectTimeout,
	}
}
