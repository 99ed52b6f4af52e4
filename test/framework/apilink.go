package framework

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// APIServerLink is the operator's network path to the kube-apiserver, which a test can cut and
// restore: while cut, every connection it carried is closed and every new dial is refused, as
// when the apiserver (or the network to it) is unreachable from the operator's pod. Only the
// operator started with it (OperatorOptions.APIServerLink) is cut off; the kubelet, the
// StatefulSet controller and the members keep their own paths, as they would in a cluster
// whose operator pod alone lost its route.
type APIServerLink struct {
	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	dial  net.Dialer
}

// NewAPIServerLink returns a link that is up.
func NewAPIServerLink() *APIServerLink {
	return &APIServerLink{conns: map[net.Conn]struct{}{}}
}

// DialContext is rest.Config's Dial: it refuses while the link is cut and tracks what it opens,
// so that Cut can close it.
func (l *APIServerLink) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	l.mu.Lock()
	cut := l.cut
	l.mu.Unlock()
	if cut {
		return nil, fmt.Errorf("dialing %s: the test cut the operator's link to the apiserver", address)
	}
	c, err := l.dial.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut { // cut while dialing: the connection must not outlive the cut
		_ = c.Close()
		return nil, fmt.Errorf("dialing %s: the test cut the operator's link to the apiserver", address)
	}
	tracked := &trackedConn{Conn: c, link: l}
	l.conns[tracked] = struct{}{}
	return tracked, nil
}

// Cut closes every connection the link carries and refuses new ones until Restore.
func (l *APIServerLink) Cut() {
	l.mu.Lock()
	l.cut = true
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	for c := range conns {
		_ = c.(*trackedConn).Conn.Close()
	}
}

// Restore lets dials through again.
func (l *APIServerLink) Restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = false
}

// open is how many connections the link carries now.
func (l *APIServerLink) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

type trackedConn struct {
	net.Conn
	link *APIServerLink
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.link.mu.Lock()
		delete(c.link.conns, c)
		c.link.mu.Unlock()
	})
	return c.Conn.Close()
}
