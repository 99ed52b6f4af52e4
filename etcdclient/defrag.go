package etcdclient

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// Defragment rewrites this member's backend file without its free pages, within timeout. The
// member serves no reads or writes while it runs, so callers defragment one member at a time.
func (m *MemberConn) Defragment(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := m.maintenance.Defragment(ctx, &pb.DefragmentRequest{}); err != nil {
		return fmt.Errorf("defragment member %s at %s (timeout %s): %w", m.target.Name, m.target.Address, timeout, err)
	}
	return nil
}

// Defragment defragments the member name of a cluster within timeout.
func (p *Pool) Defragment(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target, name string, timeout time.Duration) error {
	c, err := p.Member(cluster, creds, targets, name)
	if err != nil {
		return err
	}
	if err := c.Defragment(ctx, timeout); err != nil {
		return fmt.Errorf("cluster %s: %w", cluster, err)
	}
	return nil
}
