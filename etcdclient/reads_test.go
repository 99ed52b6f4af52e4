package etcdclient_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
)

// TestLinearizableReads: a member serves a linearizable read only while it is in contact with a
// quorum, which is what the OnDelete controller relies on to count a replaced member as back.
func TestLinearizableReads(t *testing.T) {
	c := startCluster(t, etcdtest.Config{})
	p := newPool(t)
	all := []string{c.Members[0].Name, c.Members[1].Name, c.Members[2].Name}

	t.Run("every member of a healthy cluster serves", func(t *testing.T) {
		served, err := p.LinearizableReads(context.Background(), cluster, c.Client, c.Targets(), all)
		if err != nil || !slices.Equal(served, all) {
			t.Fatalf("LinearizableReads() = %v, %v; want all of %v", served, err, all)
		}
	})
	t.Run("only the members named are asked, and a name that is no target is an error", func(t *testing.T) {
		served, err := p.LinearizableReads(context.Background(), cluster, c.Client, c.Targets(), []string{all[1], "etcd-test-9"})
		if !slices.Equal(served, all[1:2]) || err == nil || !strings.Contains(err.Error(), "etcd-test-9") {
			t.Fatalf("LinearizableReads() = %v, %v; want only %s and an error naming etcd-test-9", served, err, all[1])
		}
	})
	t.Run("reading through some members keeps the connections of the others", func(t *testing.T) {
		before := p.Handshakes()
		served, err := p.LinearizableReadsOf(context.Background(), cluster, c.Client, c.Targets()[2:])
		if err != nil || !slices.Equal(served, all[2:]) {
			t.Fatalf("LinearizableReadsOf() = %v, %v; want %v", served, err, all[2:])
		}
		if _, err := p.LinearizableReads(context.Background(), cluster, c.Client, c.Targets(), all); err != nil {
			t.Fatal(err)
		}
		if n := p.Handshakes() - before; n != 0 {
			t.Errorf("%d new handshakes: a read through one member closed the others' connections", n)
		}
		moved := c.Targets()[2]
		moved.Address = "127.0.0.1:1"
		if served, err := p.LinearizableReadsOf(context.Background(), cluster, c.Client, []etcdclient.Target{moved}); len(served) != 0 || err == nil {
			t.Fatalf("LinearizableReadsOf() through a member's new, dead address = %v, %v; want it refused", served, err)
		}
		if n := p.Members(); n != 3 {
			t.Errorf("the pool holds %d member clients, want 3: the moved member's replaced, the others kept", n)
		}
	})
	t.Run("without a quorum no member serves", func(t *testing.T) {
		if err := c.Stop(0); err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(1); err != nil {
			t.Fatal(err)
		}
		served, err := p.LinearizableReads(context.Background(), cluster, c.Client, c.Targets(), all)
		if len(served) != 0 || err == nil {
			t.Fatalf("LinearizableReads() = %v, %v with two of three members stopped; want none served", served, err)
		}
	})
}

// TestLeaderMemberListDoesNotWaitForUnreachableMembers: a member whose address accepts
// connections but never answers (a pod being replaced) does not hold the answer once the
// leader has given it. Its dial and call timeouts are far beyond the test's deadline, so
// waiting for it would fail the test.
func TestLeaderMemberListDoesNotWaitForUnreachableMembers(t *testing.T) {
	c := startCluster(t, etcdtest.Config{})
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hang.Close() })
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, conn := range held {
				_ = conn.Close()
			}
		}()
		for {
			conn, err := hang.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()
	targets := append([]etcdclient.Target{{Name: "etcd-test-hung", Address: hang.Addr().String(), ServerName: c.Targets()[0].ServerName}},
		c.Targets()...)
	p := etcdclient.NewPool(etcdclient.Options{DialTimeout: 10 * time.Minute, CallTimeout: 10 * time.Minute})
	t.Cleanup(p.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var leader etcdclient.MemberStatus
	var members []etcdclient.Member
	eventually(t, "the leader's member list", func() (bool, string) {
		var ok bool
		leader, members, ok, err = p.LeaderMemberList(ctx, cluster, c.Client, targets)
		return ok, describeErr(err)
	})
	if ctx.Err() != nil {
		t.Fatalf("LeaderMemberList waited for the member that never answers: %v", ctx.Err())
	}
	if !leader.IsLeader() || len(members) != 3 {
		t.Fatalf("LeaderMemberList() = %+v, %d members; want the leader and its 3 members", leader, len(members))
	}
}

func describeErr(err error) string {
	if err == nil {
		return "no leader answered"
	}
	return err.Error()
}

// TestLinearizableReadIsNotHeldByReconnectBackoff: while a member restarts, the reads that ask
// whether it is back fail and its connection's reconnect back-off grows (to 2 s). The first read
// after the member serves again must succeed: before, it failed until the back-off ran out, and
// the OnDelete controller counted a replaced member back about half a second late, step after step.
func TestLinearizableReadIsNotHeldByReconnectBackoff(t *testing.T) {
	c := startCluster(t, etcdtest.Config{})
	p := newPool(t)
	name := []string{c.Members[2].Name}
	if served, err := p.LinearizableReads(context.Background(), cluster, c.Client, c.Targets(), name); len(served) != 1 {
		t.Fatalf("before the restart: %v, %v", served, err)
	}
	if err := c.Stop(2); err != nil {
		t.Fatal(err)
	}
	// Reads at the pace of the controller's rejoin polling while the member is down.
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if served, _ := p.LinearizableReads(context.Background(), cluster, c.Client, c.Targets(), name); len(served) != 0 {
			t.Fatalf("a stopped member served a read")
		}
	}
	if err := c.Restart(2); err != nil {
		t.Fatal(err)
	}
	// A pool of its own, with no back-off behind it, says when the member serves again.
	fresh := newPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if served, _ := fresh.LinearizableReads(ctx, cluster, c.Client, c.Targets(), name); len(served) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the restarted member never served a read")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if served, err := p.LinearizableReads(context.Background(), cluster, c.Client, c.Targets(), name); len(served) != 1 {
		t.Fatalf("first read through the pooled connection after the member serves again: %v, %v; want it served", served, err)
	}
}
