package etcdclient

import (
	"context"
	cryptotls "crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const (
	DefaultDialTimeout       = 2 * time.Second
	DefaultCallTimeout       = 2 * time.Second
	DefaultMoveLeaderTimeout = 5 * time.Second

	// maxReconnectDelay caps gRPC's reconnect backoff (120 s by default) so a member that comes
	// back is seen again within a reconcile or two.
	maxReconnectDelay = 2 * time.Second
)

// Target is one member to dial.
type Target struct {
	// Name is the member name, which is also its pod name.
	Name string
	// Address is "podIP:2379"; an "https://" prefix is accepted.
	Address string
	// ServerName is the DNS name verified against the member's certificate,
	// "<pod>.<etcd>-peer.<ns>.svc". Dialling the IP with this name works without cluster DNS.
	ServerName string
}

// Options tunes timeouts and logging. Zero values take the defaults.
type Options struct {
	// DialTimeout bounds one connection attempt (TCP and TLS handshake).
	DialTimeout time.Duration
	// CallTimeout bounds each Status and MemberList call.
	CallTimeout time.Duration
	// MoveLeaderTimeout bounds a MoveLeader call, which waits for the transferee to catch up.
	MoveLeaderTimeout time.Duration
	Logger            logr.Logger
}

func (o Options) withDefaults() Options {
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.MoveLeaderTimeout <= 0 {
		o.MoveLeaderTimeout = DefaultMoveLeaderTimeout
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}

// MemberStatus is what one member says about itself. When Reachable is false only Name and Err
// are set.
type MemberStatus struct {
	Name      string
	Reachable bool
	ID        uint64
	ClusterID uint64
	LeaderID  uint64
	RaftTerm  uint64
	IsLearner bool
	Version   string
	// RaftIndex and RaftAppliedIndex tell how far a learner has caught up.
	RaftIndex        uint64
	RaftAppliedIndex uint64
	// DBSize is the size of the member's backend file; DBSizeInUse the part holding live data.
	// Their difference is what a defragmentation can give back.
	DBSize      int64
	DBSizeInUse int64
	// Revision is the member's MVCC revision when it answered (the response header's).
	Revision int64
	// StorageVersion is the version of the member's data (etcd 3.6 and later; empty before):
	// the cluster version it last applied, which a downgrade rewrites before any binary changes.
	StorageVersion string
	// DowngradeEnabled and DowngradeTarget are the cluster's downgrade as this member knows it.
	DowngradeEnabled bool
	DowngradeTarget  string
	Err              error
}

// IsLeader reports whether the member answered and considers itself the leader.
func (s MemberStatus) IsLeader() bool { return s.Reachable && s.ID != 0 && s.ID == s.LeaderID }

// Member is one entry of the cluster's membership list.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// MemberConn is one long-lived connection to a single member (the pool holds one per member).
type MemberConn struct {
	target      Target
	opts        Options
	client      *clientv3.Client
	maintenance pb.MaintenanceClient
	cluster     pb.ClusterClient
	kv          pb.KVClient
}

// DialMember prepares a connection to one member. It does not block: the connection is made
// by the first call and then kept (and re-established after failures) until Close.
func DialMember(creds conductortls.ClientMaterial, t Target, o Options) (*MemberConn, error) {
	return dialMember(creds, t, o.withDefaults(), nil)
}

// dialMember counts every completed TLS handshake in handshakes when it is not nil.
func dialMember(creds conductortls.ClientMaterial, t Target, o Options, handshakes *atomic.Uint64) (*MemberConn, error) {
	endpoint, err := endpointURL(t.Address, creds.Plaintext)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", t.Name, err)
	}
	tlsConfig, err := memberTLSConfig(creds, t, handshakes)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", t.Name, err)
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		TLS:         tlsConfig,
		DialTimeout: o.DialTimeout,
		// One attempt per call: the caller's next reconcile is the retry, and an unreachable
		// member must not eat the whole call timeout in back-off loops.
		MaxUnaryRetries: 1,
		Logger:          zap.NewNop(),
		DialOptions: []grpc.DialOption{
			// The user-set authority is the only one gRPC puts above the resolver's per-address
			// server name (the IP), so this is what makes the handshake verify the DNS name.
			grpc.WithAuthority(t.ServerName),
			grpc.WithConnectParams(ReconnectParams(maxReconnectDelay, o.DialTimeout)),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("member %s: create client for %s: %w", t.Name, endpoint, err)
	}
	// clientv3's Maintenance.Status(ctx, endpoint) dials a fresh connection per call; the
	// generated stubs on the client's own connection reuse it.
	conn := client.ActiveConnection()
	return &MemberConn{
		target:      t,
		opts:        o,
		client:      client,
		maintenance: pb.NewMaintenanceClient(conn),
		cluster:     pb.NewClusterClient(conn),
		kv:          pb.NewKVClient(conn),
	}, nil
}

// Target is the member this client talks to.
func (m *MemberConn) Target() Target { return m.target }

// Status asks the member for its status within the call timeout. Errors are also recorded in
// the returned MemberStatus.
func (m *MemberConn) Status(ctx context.Context) (MemberStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	// Fail fast when the connection is known to be down instead of waiting for it to recover.
	resp, err := m.maintenance.Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(false))
	if err != nil {
		err = fmt.Errorf("status of member %s at %s: %w", m.target.Name, m.target.Address, err)
		return MemberStatus{Name: m.target.Name, Err: err}, err
	}
	s := MemberStatus{
		Name:      m.target.Name,
		Reachable: true,
		LeaderID:  resp.GetLeader(),
		RaftTerm:  resp.GetRaftTerm(),
		IsLearner: resp.GetIsLearner(),
		Version:   resp.GetVersion(),

		RaftIndex:        resp.GetRaftIndex(),
		RaftAppliedIndex: resp.GetRaftAppliedIndex(),
		DBSize:           resp.GetDbSize(),
		DBSizeInUse:      resp.GetDbSizeInUse(),
		StorageVersion:   resp.GetStorageVersion(),
		DowngradeEnabled: resp.GetDowngradeInfo().GetEnabled(),
		DowngradeTarget:  resp.GetDowngradeInfo().GetTargetVersion(),
	}
	if h := resp.GetHeader(); h != nil {
		s.ID = h.GetMemberId()
		s.ClusterID = h.GetClusterId()
		s.Revision = h.GetRevision()
	}
	return s, nil
}

// MemberList returns the membership as this member knows it.
func (m *MemberConn) MemberList(ctx context.Context) ([]Member, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	resp, err := m.cluster.MemberList(ctx, &pb.MemberListRequest{}, grpc.WaitForReady(false))
	if err != nil {
		return nil, fmt.Errorf("member list from %s at %s: %w", m.target.Name, m.target.Address, err)
	}
	return membersFromPB(resp.GetMembers()), nil
}

// linearizableReadKey is the key LinearizableRead counts: nothing writes it, so the read returns
// no data, and a count carries no values either way.
const linearizableReadKey = "\x00etcd-conductor/linearizable-read"

// LinearizableRead has the member serve a linearizable read, which is what its /readyz checks: it
// succeeds only while the member is a voter in contact with a leader a quorum follows, once it
// has applied everything that leader had committed when the read began. A learner refuses it.
//
// A read is a probe of now: a connection waiting out its reconnect back-off after earlier
// failures (a restarting member refuses connections for seconds, and the back-off grows to
// maxReconnectDelay meanwhile) is tried again at once, so a member that has just started serving
// is seen by this read and not up to a back-off later.
func (m *MemberConn) LinearizableRead(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	m.reconnectNow(ctx)
	_, err := m.kv.Range(ctx, &pb.RangeRequest{Key: []byte(linearizableReadKey), CountOnly: true}, grpc.WaitForReady(false))
	if err != nil {
		return fmt.Errorf("linearizable read through member %s at %s: %w", m.target.Name, m.target.Address, err)
	}
	return nil
}

// reconnectNow ends the reconnect back-off of a connection that has failed: the next attempt
// starts now, and this waits (within ctx, at most reconnectKick) until it has, so a call made
// next is not failed at once by the back-off's state.
func (m *MemberConn) reconnectNow(ctx context.Context) {
	conn := m.client.ActiveConnection()
	if conn.GetState() != connectivity.TransientFailure {
		return
	}
	conn.ResetConnectBackoff()
	ctx, cancel := context.WithTimeout(ctx, reconnectKick)
	defer cancel()
	conn.WaitForStateChange(ctx, connectivity.TransientFailure)
}

// reconnectKick bounds how long reconnectNow waits for the new attempt to start; it starts
// within microseconds unless the process is starved.
const reconnectKick = 100 * time.Millisecond

// MoveLeader asks this member, which must be the leader, to hand leadership to member toID.
func (m *MemberConn) MoveLeader(ctx context.Context, toID uint64) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.MoveLeaderTimeout)
	defer cancel()
	_, err := m.maintenance.MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: toID})
	if err != nil {
		return fmt.Errorf("move leader from %s to %x: %w", m.target.Name, toID, err)
	}
	return nil
}

// DowngradeAction is one of etcd's downgrade calls.
type DowngradeAction string

const (
	// DowngradeValidate checks that the cluster can be downgraded to the version; it changes
	// nothing.
	DowngradeValidate DowngradeAction = "validate"
	// DowngradeEnable starts the downgrade: the cluster version drops to the target and every
	// member rewrites its storage version, after which the older binary may replace members.
	DowngradeEnable DowngradeAction = "enable"
	// DowngradeCancel ends an enabled downgrade.
	DowngradeCancel DowngradeAction = "cancel"
)

// Downgrade makes one of etcd's downgrade calls (target is "3.6" or "3.6.0"; ignored by cancel)
// and returns the cluster version the member answered with.
func (m *MemberConn) Downgrade(ctx context.Context, action DowngradeAction, target string) (string, error) {
	actions := map[DowngradeAction]pb.DowngradeRequest_DowngradeAction{
		DowngradeValidate: pb.DowngradeRequest_VALIDATE, DowngradeEnable: pb.DowngradeRequest_ENABLE, DowngradeCancel: pb.DowngradeRequest_CANCEL}
	a, ok := actions[action]
	if !ok {
		return "", fmt.Errorf("downgrade through %s: unknown action %q", m.target.Name, action)
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	resp, err := m.maintenance.Downgrade(ctx, &pb.DowngradeRequest{Action: a, Version: target})
	if err != nil {
		return "", fmt.Errorf("downgrade %s %s through %s: %w", action, target, m.target.Name, err)
	}
	return resp.GetVersion(), nil
}

// AddLearner adds a non-voting member with peerURLs and returns it with the membership that
// results. The caller must make sure the peer URLs are not a member's yet: etcd refuses a
// duplicate (ErrGRPCPeerURLExist), which is how a repeated call stays harmless.
func (m *MemberConn) AddLearner(ctx context.Context, peerURLs []string) (Member, []Member, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	resp, err := m.cluster.MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: peerURLs, IsLearner: true})
	if err != nil {
		return Member{}, nil, fmt.Errorf("add learner %s through %s: %w", strings.Join(peerURLs, ","), m.target.Name, err)
	}
	return fromPB(resp.GetMember()), membersFromPB(resp.GetMembers()), nil
}

// Promote makes learner id a voter. etcd refuses (ErrLearnerNotReady, see IsLearnerNotReady)
// until the learner holds ~90 % of the leader's log.
func (m *MemberConn) Promote(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	if _, err := m.cluster.MemberPromote(ctx, &pb.MemberPromoteRequest{ID: id}); err != nil {
		return fmt.Errorf("promote member %x through %s: %w", id, m.target.Name, err)
	}
	return nil
}

// Remove removes member id from the cluster.
func (m *MemberConn) Remove(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	if _, err := m.cluster.MemberRemove(ctx, &pb.MemberRemoveRequest{ID: id}); err != nil {
		return fmt.Errorf("remove member %x through %s: %w", id, m.target.Name, err)
	}
	return nil
}

// UpdatePeerURLs sets member id's peer URLs: where the other members dial it.
func (m *MemberConn) UpdatePeerURLs(ctx context.Context, id uint64, peerURLs []string) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	if _, err := m.cluster.MemberUpdate(ctx, &pb.MemberUpdateRequest{ID: id, PeerURLs: peerURLs}); err != nil {
		return fmt.Errorf("update member %x peer URLs to %s through %s: %w", id, strings.Join(peerURLs, ","), m.target.Name, err)
	}
	return nil
}

// IsLearnerNotReady reports etcd's refusal to promote a learner that has not caught up.
func IsLearnerNotReady(err error) bool {
	return err != nil && strings.Contains(err.Error(), rpctypes.ErrorDesc(rpctypes.ErrGRPCLearnerNotReady))
}

// IsMemberNotFound reports that the member named in a request is not (any more) in the cluster.
func IsMemberNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), rpctypes.ErrorDesc(rpctypes.ErrGRPCMemberNotFound))
}

// IsUnhealthyCluster reports etcd's refusal of a membership change while some voter has not been
// connected long enough (strict reconfiguration check), e.g. just after a promotion.
func IsUnhealthyCluster(err error) bool {
	return err != nil && strings.Contains(err.Error(), rpctypes.ErrorDesc(rpctypes.ErrGRPCUnhealthy))
}

// IsPeerURLExist reports that a member with that peer URL is already in the cluster.
func IsPeerURLExist(err error) bool {
	return err != nil && strings.Contains(err.Error(), rpctypes.ErrorDesc(rpctypes.ErrGRPCPeerURLExist))
}

func fromPB(pm *pb.Member) Member {
	return Member{
		ID:         pm.GetID(),
		Name:       pm.GetName(),
		PeerURLs:   pm.GetPeerURLs(),
		ClientURLs: pm.GetClientURLs(),
		IsLearner:  pm.GetIsLearner(),
	}
}

func membersFromPB(pms []*pb.Member) []Member {
	members := make([]Member, 0, len(pms))
	for _, pm := range pms {
		members = append(members, fromPB(pm))
	}
	return members
}

// Close drops the connection.
func (m *MemberConn) Close() error {
	if err := m.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close client of member %s: %w", m.target.Name, err)
	}
	return nil
}

// memberTLSConfig is the TLS configuration for one member; nil (plain HTTP/2) for plaintext
// material.
func memberTLSConfig(creds conductortls.ClientMaterial, t Target, handshakes *atomic.Uint64) (*cryptotls.Config, error) {
	tlsConfig, err := creds.ConfigOrPlain(t.ServerName)
	if err != nil || tlsConfig == nil {
		return nil, err
	}
	// VerifyConnection runs once per handshake, after the chain and name checks. It also makes
	// sure the name checked was the member's: gRPC substitutes its own idea of the authority
	// for tls.Config.ServerName, and etcd's resolver would make that the pod IP.
	tlsConfig.VerifyConnection = func(cs cryptotls.ConnectionState) error {
		if cs.ServerName != t.ServerName {
			return fmt.Errorf("handshake verified server name %q, want %q", cs.ServerName, t.ServerName)
		}
		if handshakes != nil {
			handshakes.Add(1)
		}
		return nil
	}
	return tlsConfig, nil
}

// endpointURL is the member's client URL: https, or http for plaintext material. An address
// whose scheme disagrees with the material is refused, never dialled in the other scheme.
func endpointURL(address string, plaintext bool) (string, error) {
	scheme := "https://"
	if plaintext {
		scheme = "http://"
	}
	switch {
	case address == "":
		return "", errors.New("empty address")
	case strings.HasPrefix(address, scheme):
		return address, nil
	case strings.Contains(address, "://"):
		return "", fmt.Errorf("address %q: the client material is for %s URLs", address, strings.TrimSuffix(scheme, "://"))
	default:
		return scheme + address, nil
	}
}
