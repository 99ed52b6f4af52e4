package etcdclient_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

const cluster = "default/etcd-test"

func startCluster(t *testing.T, cfg etcdtest.Config) *etcdtest.Cluster {
	t.Helper()
	if _, err := etcdtest.EtcdBinary(versionOr(cfg.Version)); err != nil {
		skipOrFail(t, err)
	}
	return etcdtest.Start(t, cfg)
}

func versionOr(v string) string {
	if v == "" {
		return etcdtest.DefaultVersion
	}
	return v
}

func newPool(t *testing.T) *etcdclient.Pool {
	t.Helper()
	p := etcdclient.NewPool(etcdclient.Options{DialTimeout: time.Second, CallTimeout: time.Second})
	t.Cleanup(p.Close)
	return p
}

// query fails the test unless every target answered.
func query(t *testing.T, p *etcdclient.Pool, creds conductortls.ClientMaterial, targets []etcdclient.Target) etcdclient.ClusterStatus {
	t.Helper()
	s, err := p.Query(context.Background(), cluster, creds, targets)
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	for _, m := range s.Members {
		if !m.Reachable {
			t.Fatalf("member %s unreachable: %v", m.Name, m.Err)
		}
	}
	return s
}

// eventually polls cond until it holds; clusters need a moment to elect.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened; last state: %s", what, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestQueryHealthyCluster(t *testing.T) {
	for _, version := range []string{"3.6.8", "3.7.3"} {
		t.Run(version, func(t *testing.T) {
			c := startCluster(t, etcdtest.Config{Version: version})
			p := newPool(t)
			s := query(t, p, c.Client, c.Targets())

			if len(s.Members) != 3 {
				t.Fatalf("got %d statuses, want 3", len(s.Members))
			}
			leader, ok := s.Leader()
			if !ok {
				t.Fatalf("no member answered as leader: %+v", s.Members)
			}
			for i, m := range s.Members {
				if m.Name != c.Members[i].Name {
					t.Errorf("status %d is for %s, want %s (target order)", i, m.Name, c.Members[i].Name)
				}
				if m.LeaderID != leader.ID {
					t.Errorf("%s names leader %x, %s claims to be it", m.Name, m.LeaderID, leader.Name)
				}
				if m.Version != version {
					t.Errorf("%s runs %q, want %q", m.Name, m.Version, version)
				}
				if m.ClusterID == 0 || m.ClusterID != leader.ClusterID {
					t.Errorf("%s has cluster ID %x, leader %x", m.Name, m.ClusterID, leader.ClusterID)
				}
			}
			if len(s.MemberList) != 3 {
				t.Fatalf("member list has %d entries, want 3: %+v", len(s.MemberList), s.MemberList)
			}
			byName := map[string]etcdclient.Member{}
			for _, m := range s.MemberList {
				byName[m.Name] = m
			}
			for _, st := range s.Members {
				if byName[st.Name].ID != st.ID {
					t.Errorf("member list has %s as %x, its status says %x", st.Name, byName[st.Name].ID, st.ID)
				}
			}
		})
	}
}

func TestQueryWithStoppedMembers(t *testing.T) {
	c := startCluster(t, etcdtest.Config{})
	p := newPool(t)
	before := query(t, p, c.Client, c.Targets())
	oldLeader, _ := before.Leader()
	leaderIdx := indexOf(c, oldLeader.Name)

	if err := c.Stop(leaderIdx); err != nil {
		t.Fatal(err)
	}
	var s etcdclient.ClusterStatus
	eventually(t, "a new leader among the survivors", func() (bool, string) {
		var err error
		s, err = p.Query(context.Background(), cluster, c.Client, c.Targets())
		if err != nil {
			return false, err.Error()
		}
		l, ok := s.Leader()
		return ok && l.Name != oldLeader.Name, describe(s)
	})
	stopped := s.Members[leaderIdx]
	if stopped.Reachable || stopped.Err == nil {
		t.Errorf("stopped member reported as %+v", stopped)
	}
	if !strings.Contains(stopped.Err.Error(), stopped.Name) {
		t.Errorf("error %q does not name the member", stopped.Err)
	}
	if len(s.MemberList) != 3 {
		t.Errorf("survivors list %d members, want all 3", len(s.MemberList))
	}

	// Killing a follower as well leaves one member without quorum: it answers Status, but
	// names no leader.
	newLeader, _ := s.Leader()
	follower := -1
	for i, m := range s.Members {
		if m.Reachable && m.Name != newLeader.Name {
			follower = i
		}
	}
	if err := c.Kill(follower); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lone member to lose its leader", func() (bool, string) {
		s, err := p.Query(context.Background(), cluster, c.Client, c.Targets())
		if err != nil {
			return false, err.Error()
		}
		_, hasLeader := s.Leader()
		reachable := 0
		for _, m := range s.Members {
			if m.Reachable {
				reachable++
			}
		}
		return reachable == 1 && !hasLeader, describe(s)
	})

	// Both come back and the pool reconnects to them.
	for _, i := range []int{leaderIdx, follower} {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "all members to answer again with one leader", func() (bool, string) {
		s, err := p.Query(context.Background(), cluster, c.Client, c.Targets())
		if err != nil {
			return false, err.Error()
		}
		_, hasLeader := s.Leader()
		for _, m := range s.Members {
			if !m.Reachable {
				return false, describe(s)
			}
		}
		return hasLeader, describe(s)
	})
}

func TestQueryAllUnreachable(t *testing.T) {
	c := startCluster(t, etcdtest.Config{})
	p := etcdclient.NewPool(etcdclient.Options{DialTimeout: 500 * time.Millisecond, CallTimeout: 500 * time.Millisecond})
	t.Cleanup(p.Close)
	query(t, p, c.Client, c.Targets())
	for i := range c.Members {
		if err := c.Kill(i); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	s, err := p.Query(context.Background(), cluster, c.Client, c.Targets())
	elapsed := time.Since(start)
	if err == nil {
		t.Fatalf("Query succeeded against a dead cluster: %s", describe(s))
	}
	// Generous: the point is that it returns, not how fast.
	if elapsed > 20*time.Second {
		t.Errorf("Query took %v against a dead cluster", elapsed)
	}
	for _, m := range c.Members {
		if !strings.Contains(err.Error(), m.Name) {
			t.Errorf("error %q does not name %s", err, m.Name)
		}
	}
	if s.MemberList != nil {
		t.Errorf("member list %+v from a dead cluster", s.MemberList)
	}
}

func TestQueryRejectsWrongCredentials(t *testing.T) {
	c := startCluster(t, etcdtest.Config{})
	otherCA, err := testpki.NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	otherClient, err := otherCA.ClientCert("intruder")
	if err != nil {
		t.Fatal(err)
	}
	wrongServerName := c.Targets()
	for i := range wrongServerName {
		wrongServerName[i].ServerName = "etcd-test-0.someone-else-peer.default.svc"
	}

	tests := []struct {
		name    string
		creds   conductortls.ClientMaterial
		targets []etcdclient.Target
	}{
		{name: "server signed by a CA we do not trust", creds: otherCA.ClientMaterial(otherClient), targets: c.Targets()},
		{name: "trusted server, client cert from another CA",
			creds: conductortls.ClientMaterial{CA: c.CA.CertPEM, Cert: otherClient.CertPEM, Key: otherClient.KeyPEM}, targets: c.Targets()},
		{name: "server name outside the certificate", creds: c.Client, targets: wrongServerName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t)
			s, err := p.Query(context.Background(), cluster, tt.creds, tt.targets)
			if err == nil {
				t.Fatalf("Query succeeded: %s", describe(s))
			}
			for _, m := range s.Members {
				if m.Reachable || m.Err == nil {
					t.Errorf("member %s accepted: %+v", m.Name, m)
				}
			}
		})
	}
}

func TestSteadyStateReusesConnections(t *testing.T) {
	c := startCluster(t, etcdtest.Config{})
	p := newPool(t)
	targets := c.Targets()

	query(t, p, c.Client, targets)
	first := p.Handshakes()
	if first < uint64(len(targets)) {
		t.Fatalf("first Query made %d handshakes, want at least one per member", first)
	}
	for range 5 {
		query(t, p, c.Client, targets)
	}
	if got := p.Handshakes() - first; got != 0 {
		t.Fatalf("steady-state Queries made %d new TLS handshakes, want 0", got)
	}
	if got := p.Members(); got != len(targets) {
		t.Fatalf("pool holds %d member clients, want one per member (%d)", got, len(targets))
	}

	t.Run("rotated client certificate builds new clients", func(t *testing.T) {
		pair, err := c.CA.ClientCert("rotated")
		if err != nil {
			t.Fatal(err)
		}
		before := p.Handshakes()
		query(t, p, c.CA.ClientMaterial(pair), targets)
		if got := p.Handshakes() - before; got < uint64(len(targets)) {
			t.Fatalf("rotation made %d handshakes, want one per member", got)
		}
		// The old material still works against the servers, but the pool follows what it is given.
		before = p.Handshakes()
		query(t, p, c.CA.ClientMaterial(pair), targets)
		if got := p.Handshakes() - before; got != 0 {
			t.Fatalf("%d handshakes after the rotation settled", got)
		}
		c.Client = c.CA.ClientMaterial(pair)
	})

	t.Run("changed target rebuilds only that member", func(t *testing.T) {
		changed := c.Targets()
		changed[1].ServerName = "etcd-test-client.default.svc" // another SAN of the same certificate
		before := p.Handshakes()
		query(t, p, c.Client, changed)
		if got := p.Handshakes() - before; got != 1 {
			t.Fatalf("changing one target made %d handshakes, want 1", got)
		}
	})

	t.Run("forget drops the clients", func(t *testing.T) {
		p.Forget(cluster)
		if got := p.Members(); got != 0 {
			t.Fatalf("after Forget the pool holds %d member clients, want 0", got)
		}
		before := p.Handshakes()
		query(t, p, c.Client, targets)
		if got := p.Handshakes() - before; got < uint64(len(targets)) {
			t.Fatalf("after Forget, Query made %d handshakes, want one per member", got)
		}
	})
}

func TestMoveLeader(t *testing.T) {
	c := startCluster(t, etcdtest.Config{})
	p := newPool(t)
	s := query(t, p, c.Client, c.Targets())
	leader, _ := s.Leader()
	var to etcdclient.MemberStatus
	for _, m := range s.Members {
		if m.Name != leader.Name {
			to = m
			break
		}
	}

	t.Run("from a follower is refused", func(t *testing.T) {
		err := p.MoveLeader(context.Background(), cluster, c.Client, c.Targets(), to.Name, leader.ID)
		if err == nil {
			t.Fatal("a follower moved leadership")
		}
	})
	t.Run("from an unknown member is refused", func(t *testing.T) {
		err := p.MoveLeader(context.Background(), cluster, c.Client, c.Targets(), "etcd-test-9", to.ID)
		if err == nil || !strings.Contains(err.Error(), "etcd-test-9") {
			t.Fatalf("got %v, want an error naming etcd-test-9", err)
		}
	})
	t.Run("from the leader to a follower", func(t *testing.T) {
		if err := p.MoveLeader(context.Background(), cluster, c.Client, c.Targets(), leader.Name, to.ID); err != nil {
			t.Fatalf("MoveLeader: %v", err)
		}
		eventually(t, "every member to follow "+to.Name, func() (bool, string) {
			s := query(t, p, c.Client, c.Targets())
			for _, m := range s.Members {
				if m.LeaderID != to.ID {
					return false, describe(s)
				}
			}
			return true, ""
		})
	})
}

func indexOf(c *etcdtest.Cluster, name string) int {
	for i, m := range c.Members {
		if m.Name == name {
			return i
		}
	}
	return -1
}

func describe(s etcdclient.ClusterStatus) string {
	var b strings.Builder
	for _, m := range s.Members {
		if m.Reachable {
			b.WriteString(m.Name + " id=" + hex(m.ID) + " leader=" + hex(m.LeaderID) + "; ")
		} else {
			b.WriteString(m.Name + " unreachable; ")
		}
	}
	return b.String()
}

// TestQueryPlaintextCluster: members without TLS (an Etcd without clientUrlTls, as etcd-druid
// runs them) answer plaintext material, and only it: a client never falls back from one scheme
// to the other.
func TestQueryPlaintextCluster(t *testing.T) {
	plain := startCluster(t, etcdtest.Config{Plaintext: true, EtcdName: "plain"})
	s := query(t, newPool(t), plain.Client, plain.Targets())
	if _, ok := s.Leader(); !ok || len(s.MemberList) != 3 {
		t.Fatalf("plaintext cluster: no leader or member list %+v: %s", s.MemberList, describe(s))
	}

	secure := startCluster(t, etcdtest.Config{EtcdName: "secure"})
	tests := []struct {
		name    string
		creds   conductortls.ClientMaterial
		targets []etcdclient.Target
	}{
		{name: "TLS material to plaintext members", creds: secure.Client, targets: plain.Targets()},
		{name: "plaintext material to TLS members", creds: conductortls.PlaintextMaterial(), targets: secure.Targets()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := newPool(t).Query(context.Background(), cluster, tt.creds, tt.targets)
			if err == nil {
				t.Fatalf("Query succeeded: %s", describe(s))
			}
			for _, m := range s.Members {
				if m.Reachable {
					t.Errorf("member %s answered: %+v", m.Name, m)
				}
			}
		})
	}
	t.Run("https address with plaintext material is refused", func(t *testing.T) {
		target := secure.Targets()[0]
		target.Address = "https://" + target.Address
		if _, err := etcdclient.DialMember(conductortls.PlaintextMaterial(), target, etcdclient.Options{}); err == nil {
			t.Fatal("DialMember dialled an https address in plaintext")
		}
	})
}
