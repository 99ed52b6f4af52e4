package etcdclient

import (
	"errors"
	"testing"
)

func TestTLSRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		errs []error
		want bool
	}{
		{"all answered", []error{nil, nil}, false},
		{"one down", []error{nil, errors.New(`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 10.0.0.1:2379: connect: connection refused"`)}, false},
		{"server certificate of another CA", []error{nil, errors.New(`rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`)}, true},
		{"client certificate refused", []error{errors.New(`rpc error: code = Unavailable desc = remote error: tls: bad certificate`), nil}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cs ClusterStatus
			for i, err := range tc.errs {
				m := MemberStatus{Name: string(rune('a' + i)), Reachable: err == nil, Err: err}
				cs.Members = append(cs.Members, m)
			}
			if got := cs.TLSRefused(); got != tc.want {
				t.Fatalf("TLSRefused = %v, want %v", got, tc.want)
			}
		})
	}
}
