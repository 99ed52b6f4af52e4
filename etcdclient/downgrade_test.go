package etcdclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
)

// TestDowngradeCalls drives etcd's downgrade API over mTLS on a real 3.7 cluster, as the Etcd
// reconciler does: the status carries the storage version and the downgrade state, a target two
// minors down is refused, enabling rewrites every member's storage version, cancelling ends it.
func TestDowngradeCalls(t *testing.T) {
	c := startCluster(t, etcdtest.Config{Version: "3.7.3"})
	p := newPool(t)
	ctx := context.Background()
	s := query(t, p, c.Client, c.Targets())
	for _, m := range s.Members {
		if m.StorageVersion != "3.7.0" || m.DowngradeEnabled {
			t.Fatalf("member %s: storage %q, downgrade enabled %v; want 3.7.0, not enabled", m.Name, m.StorageVersion, m.DowngradeEnabled)
		}
	}
	leader, _ := s.Leader()
	conn, err := p.Member(cluster, c.Client, c.Targets(), leader.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Downgrade(ctx, etcdclient.DowngradeValidate, "3.5"); err == nil {
		t.Fatal("a downgrade from 3.7 to 3.5 was validated; etcd must refuse it")
	}
	if v, err := conn.Downgrade(ctx, etcdclient.DowngradeValidate, "3.6"); err != nil || v != "3.7" {
		t.Fatalf("validate 3.6 = %q, %v; want cluster version 3.7", v, err)
	}
	if _, err := conn.Downgrade(ctx, etcdclient.DowngradeEnable, "3.6"); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, p, c, "storage version 3.6.0 and the downgrade enabled everywhere", func(m etcdclient.MemberStatus) bool {
		return m.StorageVersion == "3.6.0" && m.DowngradeEnabled && m.DowngradeTarget == "3.6.0"
	})
	if _, err := conn.Downgrade(ctx, etcdclient.DowngradeCancel, ""); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, p, c, "the downgrade cancelled everywhere", func(m etcdclient.MemberStatus) bool { return !m.DowngradeEnabled })
	if _, err := conn.Downgrade(ctx, "sideways", "3.6"); err == nil {
		t.Fatal("an unknown downgrade action was sent")
	}
}

func waitMembers(t *testing.T, p *etcdclient.Pool, c *etcdtest.Cluster, what string, ok func(etcdclient.MemberStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := query(t, p, c.Client, c.Targets())
		all := true
		for _, m := range s.Members {
			all = all && ok(m)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 20s: %+v", what, s.Members)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
