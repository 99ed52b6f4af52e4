package etcdclient_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/decision"
)

// TestStaleLeaseLosesToTheMembers is DEP-07's known limitation, replayed on a real cluster: the
// member leases still name a follower as leader (their renewal lags a leadership change), and the
// controller's role resolution must follow what the members say instead.
func TestStaleLeaseLosesToTheMembers(t *testing.T) {
	c := startCluster(t, etcdtest.Config{})
	p := newPool(t)
	s := query(t, p, c.Client, c.Targets())
	leader, ok := s.Leader()
	if !ok {
		t.Fatalf("no leader: %+v", s.Members)
	}
	var follower string
	var names []string
	for _, m := range s.Members {
		names = append(names, m.Name)
		if m.Name != leader.Name && follower == "" {
			follower = m.Name
		}
	}
	now := time.Now()
	var leases []coordinationv1.Lease
	for _, m := range s.Members {
		role := "Member"
		if m.Name == follower { // stale: this member led before the (simulated) change
			role = "Leader"
		}
		leases = append(leases, coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(fmt.Sprintf("%x:%x:%s", m.ID, m.ClusterID, role)),
				LeaseDurationSeconds: ptr.To(int32(40)),
				RenewTime:            &metav1.MicroTime{Time: now},
			},
		})
	}

	got := roles.Resolve(names, decision.ReportsFromClusterStatus(&druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: c.Name}}, s), leases, roles.SourcePolicyAuto, now)
	if got.Source != roles.SourceDirect || !got.Mismatch {
		t.Fatalf("Resolve = source %s, mismatch %v (%s); want direct with a mismatch", got.Source, got.Mismatch, got.Detail)
	}
	if got.LeaderPod != leader.Name || got.Roles[leader.Name] != rollout.RoleLeader || got.Roles[follower] != rollout.RoleFollower {
		t.Errorf("roles %v, leader %s; want %s leading and %s following", got.Roles, got.LeaderPod, leader.Name, follower)
	}

	leaseOnly := roles.Resolve(names, decision.ReportsFromClusterStatus(&druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: c.Name}}, s), leases, roles.SourcePolicyLeaseOnly, now)
	if leaseOnly.Roles[follower] != rollout.RoleLeader {
		t.Errorf("LeaseOnly must believe the lease (the etcd-druid behaviour this replaces): %v", leaseOnly.Roles)
	}
}
