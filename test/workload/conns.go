// Package workload holds the measuring instruments of the e2e scenarios and the benchmark: a
// writer that puts sequential keys at a steady rate, an auditor that checks every acknowledged
// key survived, a quorum monitor, a leader monitor and a Recorder that runs them together and
// returns one Report.
//
// Every instrument learns the current members from a func() []Endpoint it calls again and again,
// because a recreated member pod may come back with a new IP. Traffic goes only to the addresses
// that function returns.
package workload

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// Endpoint is one member as the instruments reach it.
type Endpoint struct {
	// Name is the member (pod) name.
	Name string
	// Address is "ip:port" of the member's client listener.
	Address string
	// ServerName is verified against the member's certificate, "<pod>.<etcd>-peer.<ns>.svc".
	ServerName string
}

// EndpointsFunc returns the members as they are now. The instruments call it before every
// round of requests (tens of times a second), so it should answer from memory, e.g. an informer
// cache, and return quickly.
type EndpointsFunc func() []Endpoint

// StaticEndpoints is an EndpointsFunc for a membership that does not move.
func StaticEndpoints(eps ...Endpoint) EndpointsFunc {
	eps = append([]Endpoint(nil), eps...)
	return func() []Endpoint { return eps }
}

const (
	// maxReconnectDelay caps gRPC's reconnect back-off (120 s by default): a restarted member
	// must be seen again within a second, or the instruments would measure the back-off.
	maxReconnectDelay = time.Second
	connectTimeout    = time.Second
	// etcd answers pings more frequent than every 5 s with GOAWAY (too_many_pings).
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 2 * time.Second
)

// memberConn is one gRPC connection to one member.
type memberConn struct {
	ep    Endpoint
	cc    *grpc.ClientConn
	kv    pb.KVClient
	maint pb.MaintenanceClient
}

// memberConns keeps one connection per member and follows membership changes: a member that
// left, or whose address or server name changed, has its connection closed.
type memberConns struct {
	creds conductortls.ClientMaterial

	mu     sync.Mutex
	closed bool
	conns  map[string]*memberConn
}

func newMemberConns(creds conductortls.ClientMaterial) *memberConns {
	return &memberConns{creds: creds, conns: map[string]*memberConn{}}
}

// dialFailure is a member that could not be given a connection (bad address or TLS material).
type dialFailure struct {
	ep  Endpoint
	err error
}

// sync returns one connection per endpoint, in endpoint order, and the endpoints that could not
// be dialled. Connections are created lazily by gRPC, so sync does not block on the network.
func (s *memberConns) sync(eps []Endpoint) ([]*memberConn, []dialFailure) {
	var stale []*memberConn
	defer func() {
		for _, c := range stale {
			_ = c.cc.Close()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, []dialFailure{{err: errors.New("connections are closed")}}
	}
	want := make(map[string]bool, len(eps))
	out := make([]*memberConn, 0, len(eps))
	var failed []dialFailure
	for _, ep := range eps {
		if want[ep.Name] {
			failed = append(failed, dialFailure{ep: ep, err: fmt.Errorf("member %s listed twice", ep.Name)})
			continue
		}
		want[ep.Name] = true
		if c, ok := s.conns[ep.Name]; ok {
			if c.ep == ep {
				out = append(out, c)
				continue
			}
			stale = append(stale, c)
			delete(s.conns, ep.Name)
		}
		c, err := dial(s.creds, ep)
		if err != nil {
			failed = append(failed, dialFailure{ep: ep, err: err})
			continue
		}
		s.conns[ep.Name] = c
		out = append(out, c)
	}
	for name, c := range s.conns {
		if !want[name] {
			stale = append(stale, c)
			delete(s.conns, name)
		}
	}
	return out, failed
}

func (s *memberConns) close() {
	s.mu.Lock()
	conns := s.conns
	s.conns = map[string]*memberConn{}
	s.closed = true
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.cc.Close()
	}
}

func dial(creds conductortls.ClientMaterial, ep Endpoint) (*memberConn, error) {
	if _, _, err := net.SplitHostPort(ep.Address); err != nil {
		return nil, fmt.Errorf("member %s: address %q is not ip:port: %w", ep.Name, ep.Address, err)
	}
	tlsConfig, err := creds.ConfigOrPlain(ep.ServerName)
	if err != nil {
		return nil, fmt.Errorf("member %s: client TLS config: %w", ep.Name, err)
	}
	transport := insecure.NewCredentials()
	if tlsConfig != nil {
		transport = credentials.NewTLS(tlsConfig)
	}
	// No etcd client library on purpose: its interceptors retry and wait for ready, which would
	// hide exactly the failures the instruments are there to count.
	cc, err := grpc.NewClient("passthrough:///"+ep.Address,
		grpc.WithTransportCredentials(transport),
		grpc.WithConnectParams(etcdclient.ReconnectParams(maxReconnectDelay, connectTimeout)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
	)
	if err != nil {
		return nil, fmt.Errorf("member %s: connection to %s: %w", ep.Name, ep.Address, err)
	}
	return &memberConn{ep: ep, cc: cc, kv: pb.NewKVClient(cc), maint: pb.NewMaintenanceClient(cc)}, nil
}

// failFast makes a call on a connection known to be down fail at once instead of waiting for the
// reconnect, so the caller can move on to another member.
var failFast = grpc.WaitForReady(false)

// prefixEnd is the smallest key greater than every key starting with prefix.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}
