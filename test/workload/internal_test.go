package workload

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want ErrorClass
	}{
		{"client deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), ClassDeadline},
		{"context deadline wrapped", fmt.Errorf("put: %w", context.DeadlineExceeded), ClassDeadline},
		{"stopped by us", status.Error(codes.Canceled, "context canceled"), ClassCanceled},
		{"connection refused", status.Error(codes.Unavailable, "connection error: dial tcp: connection refused"), ClassUnavailable},
		{"no leader", rpctypes.ErrGRPCNoLeader, ClassNoLeader},
		{"no leader wrapped", fmt.Errorf("put /k on member m: %w", rpctypes.ErrGRPCNoLeader), ClassNoLeader},
		{"leader changed", rpctypes.ErrGRPCLeaderChanged, ClassLeaderChanged},
		{"server timeout", rpctypes.ErrGRPCTimeout, ClassServerTimeout},
		{"server timeout after leader failure", rpctypes.ErrGRPCTimeoutDueToLeaderFail, ClassServerTimeout},
		{"stopping", rpctypes.ErrGRPCStopped, ClassStopped},
		{"readyz not ok", fmt.Errorf("probe: %w", &notReadyError{member: "m", status: 503, body: "[-]linearizable_read failed"}), ClassNotReady},
		{"http refused", errors.New(`Get "http://10.0.0.1:2381/readyz": dial tcp 10.0.0.1:2381: connect: connection refused`), ClassUnavailable},
		{"anything else", errors.New("boom"), ClassOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err); got != tt.want {
				t.Errorf("classify(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestPrefixEnd(t *testing.T) {
	tests := []struct{ prefix, want string }{
		{"/workload/run/", "/workload/run0"},
		{"a\xff", "b"},
		{"\xff\xff", "\x00"},
	}
	for _, tt := range tests {
		if got := prefixEnd(tt.prefix); got != tt.want {
			t.Errorf("prefixEnd(%q) = %q, want %q", tt.prefix, got, tt.want)
		}
	}
}

// memberConns keeps a member's connection while its endpoint is unchanged and closes it when
// the member leaves or moves. Connections are lazy, so no server is needed.
func TestMemberConnsFollowEndpoints(t *testing.T) {
	pki, err := testpki.NewEtcdPKI("etcd", "default")
	if err != nil {
		t.Fatal(err)
	}
	conns := newMemberConns(pki.ClientMaterial())
	t.Cleanup(conns.close)
	ep := func(name, addr string) Endpoint {
		return Endpoint{Name: name, Address: addr, ServerName: testpki.MemberServerName(name, "etcd", "default")}
	}
	first, failed := conns.sync([]Endpoint{ep("etcd-0", "127.0.0.1:1"), ep("etcd-1", "127.0.0.1:2"), ep("etcd-2", "127.0.0.1:3")})
	if len(first) != 3 || len(failed) != 0 {
		t.Fatalf("got %d connections and failures %v, want 3 and none", len(first), failed)
	}

	second, failed := conns.sync([]Endpoint{ep("etcd-0", "127.0.0.1:1"), ep("etcd-1", "127.0.0.1:9"), ep("etcd-3", "nonsense")})
	if len(second) != 2 || len(failed) != 1 || failed[0].ep.Name != "etcd-3" {
		t.Fatalf("got %d connections and failures %v, want 2 and one for etcd-3", len(second), failed)
	}
	if second[0] != first[0] {
		t.Errorf("unchanged member etcd-0 got a new connection")
	}
	if second[1] == first[1] || second[1].ep.Address != "127.0.0.1:9" {
		t.Errorf("moved member etcd-1 kept its old connection")
	}
	for _, c := range []*memberConn{first[1], first[2]} {
		if s := c.cc.GetState(); s != connectivity.Shutdown {
			t.Errorf("connection of %s (moved or left) is %v, want shut down", c.ep.Name, s)
		}
	}
	if s := first[0].cc.GetState(); s == connectivity.Shutdown {
		t.Errorf("connection of unchanged etcd-0 was shut down")
	}
}
