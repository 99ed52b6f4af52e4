package memberaccess

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// What the operator's side knows of etcd's members, spelled here so that only this package
// imports etcdclient (test/structure checks it): a controller asks and orders through a Cluster.
type (
	// Target is one member pod to dial: its address and the DNS name its certificate names.
	Target = etcdclient.Target
	// ClusterStatus is one round of questions to the members.
	ClusterStatus = etcdclient.ClusterStatus
	// MemberStatus is one member's answer, or why it gave none.
	MemberStatus = etcdclient.MemberStatus
	// EtcdMember is an entry of etcd's member list.
	EtcdMember = etcdclient.Member
	// DowngradeAction is one of etcd's downgrade calls.
	DowngradeAction = etcdclient.DowngradeAction
	// Conn is one member's pooled connection, for what only that member can answer (its own
	// keyspace digest).
	Conn = etcdclient.MemberConn
)

// etcd's downgrade calls.
const (
	DowngradeValidate = etcdclient.DowngradeValidate
	DowngradeEnable   = etcdclient.DowngradeEnable
	DowngradeCancel   = etcdclient.DowngradeCancel
)

// What etcd's refusals mean, for the callers that tell them apart.
var (
	IsMemberNotFound   = etcdclient.IsMemberNotFound
	IsLearnerNotReady  = etcdclient.IsLearnerNotReady
	IsPeerURLExist     = etcdclient.IsPeerURLExist
	IsUnhealthyCluster = etcdclient.IsUnhealthyCluster
)

// Pool is the member connection pool (etcdclient.Pool) as the operator uses it: one per
// manager, shared by every controller, each Etcd's connections kept under a PoolKey.
type Pool interface {
	Query(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target) (ClusterStatus, error)
	MoveLeader(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target, fromName string, toID uint64) error
	LinearizableReads(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target, names []string) ([]string, error)
	LinearizableReadsOf(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target) ([]string, error)
	Defragment(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []Target, name string, timeout time.Duration) error
	Member(cluster string, creds conductortls.ClientMaterial, targets []Target, name string) (*Conn, error)
	Forget(cluster string)
}

var _ Pool = (*etcdclient.Pool)(nil)

// ConnectionPool is the pool the manager builds (NewPool) and closes, whose connections its
// metrics count.
type ConnectionPool = etcdclient.Pool

// PoolOptions configures NewPool.
type PoolOptions = etcdclient.Options

// NewPool builds the member connection pool.
func NewPool(o PoolOptions) *ConnectionPool { return etcdclient.NewPool(o) }

// Purpose says which of an Etcd's sets of pooled connections a caller uses. The pool keeps one set
// per key and closes the connections of members a call leaves out of its targets, so callers that
// dial different members (the membership controller also dials pods the StatefulSet no longer
// counts, recovery every labelled pod, plan through port-forwards) keep theirs apart, and the
// rollout, the Etcd reconciler and defragmentation, which dial the StatefulSet's member pods,
// share one.
type Purpose string

const (
	// ForMembers: the StatefulSet's member pods (rollout, Etcd reconciler, defragmentation).
	ForMembers Purpose = ""
	// ForMembership: the membership controller's pods.
	ForMembership Purpose = "membership"
	// ForRecovery: the recovery controller's pods.
	ForRecovery Purpose = "recovery"
	// ForPlan: the plan command's, addresses overridden for port-forwards.
	ForPlan Purpose = "plan"
)

// PoolKey names an Etcd's connections for a purpose in the pool.
func PoolKey(namespace, etcdName string, p Purpose) string {
	key := namespace + "/" + etcdName
	if p != ForMembers {
		key += "/" + string(p)
	}
	return key
}

// ErrNoLeader is what an order through the leader returns when no member answered as leader.
var ErrNoLeader = errors.New("no member answered as the leader")

// Cluster is one Etcd's members as one caller reaches them: the pool's connections under one key,
// one client key pair, the member pods dialled. Its methods are the verbs the planners name; an
// order that etcd applies through raft goes to the member that answered as leader in the status
// the caller decided on, so it is sent to the member whose answer the decision rests on.
type Cluster struct {
	pool    Pool
	key     string
	creds   conductortls.ClientMaterial
	targets []Target
}

// NewCluster reaches etcd's members targets through pool with creds, under the key of purpose.
func NewCluster(pool Pool, etcd *druidv1alpha1.Etcd, purpose Purpose, creds conductortls.ClientMaterial, targets []Target) *Cluster {
	return &Cluster{pool: pool, key: PoolKey(etcd.Namespace, etcd.Name, purpose), creds: creds, targets: targets}
}

// Key is the cluster's key in the pool.
func (c *Cluster) Key() string { return c.key }

// Targets are the member pods dialled.
func (c *Cluster) Targets() []Target { return c.targets }

// Statuses asks every target for its status, concurrently; one entry per target, unanswered ones
// with their error.
func (c *Cluster) Statuses(ctx context.Context) (ClusterStatus, error) {
	return c.pool.Query(ctx, c.key, c.creds, c.targets)
}

// MoveLeader asks fromName, the leader, to hand leadership to the member toID.
func (c *Cluster) MoveLeader(ctx context.Context, fromName string, toID uint64) error {
	return c.pool.MoveLeader(ctx, c.key, c.creds, c.targets, fromName, toID)
}

// AddLearner adds a learner with peerURLs, through the leader of cs.
func (c *Cluster) AddLearner(ctx context.Context, cs *ClusterStatus, peerURLs []string) (EtcdMember, error) {
	leader, err := c.leader(cs)
	if err != nil {
		return EtcdMember{}, fmt.Errorf("adding a learner: %w", err)
	}
	m, _, err := leader.AddLearner(ctx, peerURLs)
	return m, err
}

// Promote makes learner id a voter, through the leader of cs.
func (c *Cluster) Promote(ctx context.Context, cs *ClusterStatus, id uint64) error {
	leader, err := c.leader(cs)
	if err != nil {
		return fmt.Errorf("promoting %x: %w", id, err)
	}
	return leader.Promote(ctx, id)
}

// Remove removes member id, through the leader of cs.
func (c *Cluster) Remove(ctx context.Context, cs *ClusterStatus, id uint64) error {
	leader, err := c.leader(cs)
	if err != nil {
		return fmt.Errorf("removing %x: %w", id, err)
	}
	return leader.Remove(ctx, id)
}

// UpdatePeerURLs sets member id's peer URLs, through the leader of cs.
func (c *Cluster) UpdatePeerURLs(ctx context.Context, cs *ClusterStatus, id uint64, peerURLs []string) error {
	leader, err := c.leader(cs)
	if err != nil {
		return fmt.Errorf("updating the peer URLs of %x: %w", id, err)
	}
	return leader.UpdatePeerURLs(ctx, id, peerURLs)
}

// Downgrade makes etcd's downgrade call action, through the leader of cs. Enabling validates
// first, so a target etcd refuses is reported as such and nothing changes.
func (c *Cluster) Downgrade(ctx context.Context, cs *ClusterStatus, action DowngradeAction, target string) error {
	leader, err := c.leader(cs)
	if err != nil {
		return fmt.Errorf("downgrade %s: %w", action, err)
	}
	if action == DowngradeEnable {
		if _, err := leader.Downgrade(ctx, DowngradeValidate, target); err != nil {
			return err
		}
	}
	_, err = leader.Downgrade(ctx, action, target)
	return err
}

// Defragment defragments member name, waiting at most timeout.
func (c *Cluster) Defragment(ctx context.Context, name string, timeout time.Duration) error {
	return c.pool.Defragment(ctx, c.key, c.creds, c.targets, name, timeout)
}

// LinearizableReads has the members named serve a linearizable read, concurrently, and returns
// those that did; the others' errors joined.
func (c *Cluster) LinearizableReads(ctx context.Context, names []string) ([]string, error) {
	return c.pool.LinearizableReads(ctx, c.key, c.creds, c.targets, names)
}

// LinearizableReadsOf has the members of some, a few of the cluster's, serve a linearizable read,
// replacing only their connections (a watch on a few members shares the connections the next
// decision reads through).
func (c *Cluster) LinearizableReadsOf(ctx context.Context, some []Target) ([]string, error) {
	return c.pool.LinearizableReadsOf(ctx, c.key, c.creds, some)
}

// Member is the pooled connection of member name, for what only it can answer.
func (c *Cluster) Member(name string) (*Conn, error) {
	return c.pool.Member(c.key, c.creds, c.targets, name)
}

// Forget closes the cluster's pooled connections.
func (c *Cluster) Forget() { c.pool.Forget(c.key) }

func (c *Cluster) leader(cs *ClusterStatus) (*Conn, error) {
	if cs == nil {
		return nil, ErrNoLeader
	}
	leader, ok := cs.Leader()
	if !ok {
		return nil, ErrNoLeader
	}
	return c.Member(leader.Name)
}

// Reach reaches etcd's members as a caller that asks them seldom does: every labelled member pod
// with an address, read from the apiserver, and the client key pair read fresh (the answers decide
// what is rendered or ordered, and the members' silence says nothing about the key pair).
func (a *Access) Reach(ctx context.Context, pool Pool, etcd *druidv1alpha1.Etcd) (*Cluster, error) {
	pods, err := ReadLabelledPods(ctx, a.reader, etcd)
	if err != nil {
		return nil, err
	}
	targets := Targets(etcd, pods)
	if len(targets) == 0 {
		return nil, fmt.Errorf("%s/%s: %w", etcd.Namespace, etcd.Name, ErrNoMemberAddress)
	}
	creds, err := a.FreshClientTLS(ctx, etcd)
	if err != nil {
		return nil, err
	}
	return NewCluster(pool, etcd, ForMembers, creds, targets), nil
}
