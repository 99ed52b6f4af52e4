package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// ClusterStatus is one round of questions to a cluster.
type ClusterStatus struct {
	// Members holds one entry per target, in target order.
	Members []MemberStatus
	// MemberList comes from one reachable member (the leader when it answered); nil if none.
	MemberList []Member
}

// Leader returns the status of the member that answered as leader.
func (s ClusterStatus) Leader() (MemberStatus, bool) {
	for _, m := range s.Members {
		if m.IsLeader() {
			return m, true
		}
	}
	return MemberStatus{}, false
}

// TLSRefused tells whether a member that did not answer failed the TLS handshake: it served a
// certificate the CA does not verify, or refused the client's. That is what a renewed
// certificate or a rotated CA looks like to a caller holding the material from before, even while
// other members still answer on connections opened earlier.
func (s ClusterStatus) TLSRefused() bool {
	for _, m := range s.Members {
		if !m.Reachable && m.Err != nil && isTLSRefusal(m.Err.Error()) {
			return true
		}
	}
	return false
}

func isTLSRefusal(msg string) bool {
	for _, sign := range []string{"authentication handshake failed", "x509:", "remote error: tls:"} {
		if strings.Contains(msg, sign) {
			return true
		}
	}
	return false
}

// Pool caches member connections per cluster. It is safe for concurrent use.
type Pool struct {
	opts       Options
	handshakes atomic.Uint64

	mu       sync.Mutex
	closed   bool
	clusters map[string]map[string]*pooledMember // cluster → member name → client
}

// pooledMember is a client together with what it was built from, so a change of either is seen.
type pooledMember struct {
	client      *MemberConn
	fingerprint string
	target      Target
}

// NewPool returns an empty pool.
func NewPool(o Options) *Pool {
	return &Pool{opts: o.withDefaults(), clusters: map[string]map[string]*pooledMember{}}
}

// Handshakes is the number of TLS handshakes the pool's connections have completed.
func (p *Pool) Handshakes() uint64 { return p.handshakes.Load() }

// Members is the number of member clients the pool holds open (each one a gRPC connection).
func (p *Pool) Members() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, members := range p.clusters {
		n += len(members)
	}
	return n
}

// Query asks every target for its status concurrently and one reachable member for the member
// list. It returns an error only when no target answered; per-member failures are in
// MemberStatus.Err.
func (p *Pool) Query(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target) (ClusterStatus, error) {
	clients, err := p.clients(cluster, creds, targets, allMembers)
	if err != nil {
		return ClusterStatus{}, err
	}
	status := ClusterStatus{Members: make([]MemberStatus, len(targets))}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status.Members[i], _ = c.Status(ctx)
		}()
	}
	wg.Wait()

	var errs []error
	for _, i := range memberListOrder(status.Members) {
		list, err := clients[i].MemberList(ctx)
		if err == nil {
			status.MemberList = list
			return status, nil
		}
		errs = append(errs, err)
		p.opts.Logger.V(1).Info("member list failed, trying the next member", "cluster", cluster, "member", targets[i].Name, "error", err)
	}
	for _, m := range status.Members {
		if m.Err != nil {
			errs = append(errs, m.Err)
		}
	}
	if len(targets) == 0 {
		errs = append(errs, errors.New("no targets"))
	}
	return status, fmt.Errorf("no member of cluster %s answered: %w", cluster, errors.Join(errs...))
}

// LeaderMemberList asks every target for its status concurrently and returns as soon as the
// leader has answered, with the leader's member list. A member that cannot be reached (a pod
// being replaced, whose address no longer answers) costs nothing once the leader has: Query
// would wait out its dial timeout. ok is false when every target answered or failed without the
// leader among them, or the leader's member list failed.
func (p *Pool) LeaderMemberList(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target) (leader MemberStatus, members []Member, ok bool, err error) {
	clients, err := p.clients(cluster, creds, targets, allMembers)
	if err != nil {
		return MemberStatus{}, nil, false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		status MemberStatus
		client *MemberConn
	}
	answers := make(chan answer, len(clients))
	for _, c := range clients {
		go func() {
			s, _ := c.Status(ctx)
			answers <- answer{s, c}
		}()
	}
	var errs []error
	for range clients {
		a := <-answers
		if !a.status.IsLeader() {
			if a.status.Err != nil {
				errs = append(errs, a.status.Err)
			}
			continue
		}
		list, err := a.client.MemberList(ctx)
		if err != nil {
			return a.status, nil, false, err
		}
		return a.status, list, true, nil
	}
	return MemberStatus{}, nil, false, errors.Join(errs...)
}

// memberListOrder lists the reachable members, the leader first: its view of the membership is
// the authoritative one.
func memberListOrder(members []MemberStatus) []int {
	var order []int
	for i, m := range members {
		if m.IsLeader() {
			order = append([]int{i}, order...)
		} else if m.Reachable {
			order = append(order, i)
		}
	}
	return order
}

// MoveLeader asks the member fromName (the current leader) to hand leadership to member toID.
func (p *Pool) MoveLeader(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target, fromName string, toID uint64) error {
	clients, err := p.clients(cluster, creds, targets, allMembers)
	if err != nil {
		return err
	}
	for _, c := range clients {
		if c.Target().Name == fromName {
			if err := c.MoveLeader(ctx, toID); err != nil {
				return fmt.Errorf("cluster %s: %w", cluster, err)
			}
			return nil
		}
	}
	return fmt.Errorf("cluster %s: member %s is not among the targets", cluster, fromName)
}

// LinearizableReads has each member named in names (all of them among targets) serve a
// linearizable read, concurrently, and returns the names of those that did. targets are all the
// cluster's members, as for Query, so the pool keeps the connections of the others. The error
// joins the refusals; it is nil when every named member served.
func (p *Pool) LinearizableReads(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target, names []string) ([]string, error) {
	clients, err := p.clients(cluster, creds, targets, allMembers)
	if err != nil {
		return nil, err
	}
	var asked []*MemberConn
	for _, c := range clients {
		if slices.Contains(names, c.Target().Name) {
			asked = append(asked, c)
		}
	}
	served, err := readEach(ctx, asked)
	var errs []error
	for _, n := range names {
		if !slices.ContainsFunc(targets, func(t Target) bool { return t.Name == n }) {
			errs = append(errs, fmt.Errorf("cluster %s: member %s is not among the targets", cluster, n))
		}
	}
	return served, errors.Join(append([]error{err}, errs...)...)
}

// LinearizableReadsOf has every member of targets, some of the cluster's, serve a linearizable
// read, concurrently, and returns the names of those that did. Unlike the calls that take every
// member's target, it adds or replaces only the connections of targets and leaves the cluster's
// others alone, so a caller watching a few members (a rollout waiting on replaced ones) shares
// their connections with the calls that ask them all: the connection a watch saw serve first is
// the one the next decision reads through.
func (p *Pool) LinearizableReadsOf(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target) ([]string, error) {
	clients, err := p.clients(cluster, creds, targets, someMembers)
	if err != nil {
		return nil, err
	}
	return readEach(ctx, clients)
}

// readEach has every client serve a linearizable read, concurrently, and returns the names of
// those that did, and the others' errors joined.
func readEach(ctx context.Context, clients []*MemberConn) ([]string, error) {
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.LinearizableRead(ctx)
		}()
	}
	wg.Wait()
	var served []string
	for i, c := range clients {
		if errs[i] == nil {
			served = append(served, c.Target().Name)
		}
	}
	return served, errors.Join(errs...)
}

// Member returns the pooled client of member name among targets, for membership changes
// (AddLearner, Promote, Remove) the caller sends through one member, usually the leader.
func (p *Pool) Member(cluster string, creds conductortls.ClientMaterial, targets []Target, name string) (*MemberConn, error) {
	clients, err := p.clients(cluster, creds, targets, allMembers)
	if err != nil {
		return nil, err
	}
	for _, c := range clients {
		if c.Target().Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("cluster %s: member %s is not among the targets", cluster, name)
}

// Forget closes and drops the clients of one cluster, e.g. after its Etcd was deleted.
func (p *Pool) Forget(cluster string) {
	p.mu.Lock()
	members := p.clusters[cluster]
	delete(p.clusters, cluster)
	p.mu.Unlock()
	p.closeAll(cluster, members)
}

// Close closes every client; later calls fail.
func (p *Pool) Close() {
	p.mu.Lock()
	clusters := p.clusters
	p.clusters = map[string]map[string]*pooledMember{}
	p.closed = true
	p.mu.Unlock()
	for name, members := range clusters {
		p.closeAll(name, members)
	}
}

// targetScope says what a call's targets are: every member of the cluster, or some of them.
type targetScope int

const (
	// allMembers: clients of members not targeted are closed (they left the cluster).
	allMembers targetScope = iota
	// someMembers: clients of members not targeted are kept.
	someMembers
)

// clients returns one client per target in target order. Clients whose material or address
// changed are replaced; with allMembers, clients of members no longer targeted are closed.
func (p *Pool) clients(cluster string, creds conductortls.ClientMaterial, targets []Target, scope targetScope) ([]*MemberConn, error) {
	fingerprint := creds.Fingerprint()
	var stale []*pooledMember

	p.mu.Lock()
	defer func() {
		p.mu.Unlock()
		for _, m := range stale {
			p.closeMember(cluster, m)
		}
	}()
	if p.closed {
		return nil, errors.New("etcdclient: pool is closed")
	}
	cached := p.clusters[cluster]
	next := make(map[string]*pooledMember, len(targets))
	if scope == someMembers {
		maps.Copy(next, cached)
	}
	targeted := make(map[string]bool, len(targets))
	out := make([]*MemberConn, len(targets))
	for i, t := range targets {
		if targeted[t.Name] {
			return nil, fmt.Errorf("cluster %s: member %s is targeted twice", cluster, t.Name)
		}
		targeted[t.Name] = true
		if m, ok := cached[t.Name]; ok && m.fingerprint == fingerprint && m.target == t {
			next[t.Name] = m
			out[i] = m.client
			continue
		}
		c, err := dialMember(creds, t, p.opts, &p.handshakes)
		if err != nil {
			// Keep what was cached untouched; the new clients made so far are closed.
			for name, m := range next {
				if cached[name] != m {
					stale = append(stale, m)
				}
			}
			return nil, fmt.Errorf("cluster %s: %w", cluster, err)
		}
		next[t.Name] = &pooledMember{client: c, fingerprint: fingerprint, target: t}
		out[i] = c
		p.opts.Logger.V(1).Info("new member client", "cluster", cluster, "member", t.Name, "address", t.Address)
	}
	for name, m := range cached {
		if next[name] != m {
			stale = append(stale, m)
		}
	}
	p.clusters[cluster] = next
	return out, nil
}

func (p *Pool) closeAll(cluster string, members map[string]*pooledMember) {
	for _, m := range members {
		p.closeMember(cluster, m)
	}
}

func (p *Pool) closeMember(cluster string, m *pooledMember) {
	if err := m.client.Close(); err != nil {
		p.opts.Logger.Info("closing member client failed", "cluster", cluster, "member", m.target.Name, "error", err)
	}
}
