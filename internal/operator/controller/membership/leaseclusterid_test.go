package membership

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

var leaseNow = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

func leaseEtcd(replicas int32) *druidv1alpha1.Etcd {
	return &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns", UID: "etcd-uid"},
		Spec: druidv1alpha1.EtcdSpec{Replicas: replicas}}
}

// memberLease builds a member Lease as the Etcd reconciler creates it and the sidecar renews it:
// controlled by the Etcd, 15 s, renewed 2 s ago by holder.
type memberLease struct{ coordinationv1.Lease }

func lease(name, holder string) memberLease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(leaseEtcd(3), druidv1alpha1.GroupVersion.WithKind("Etcd"))}}}
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.LeaseDurationSeconds = ptr.To[int32](15)
	l.Spec.RenewTime = &metav1.MicroTime{Time: leaseNow.Add(-2 * time.Second)}
	return memberLease{l}
}

func (l memberLease) renewedAgo(d time.Duration) memberLease {
	l.Spec.RenewTime = &metav1.MicroTime{Time: leaseNow.Add(-d)}
	return l
}

func (l memberLease) neverRenewed() memberLease {
	l.Spec.RenewTime = nil
	return l
}

func (l memberLease) foreign() memberLease {
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "x", Controller: ptr.To(true)}}
	return l
}

func leases(ls ...memberLease) []coordinationv1.Lease {
	var out []coordinationv1.Lease
	for _, l := range ls {
		out = append(out, l.Lease)
	}
	return out
}

func TestLeaseClusterID(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int32
		leases   []coordinationv1.Lease
		want     string
		wantFrom []string
	}{
		{name: "two of three agree", replicas: 3,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-1", "b:c1:Member"), lease("main-2", "").neverRenewed()),
			want:   "c1", wantFrom: []string{"main-0", "main-1"}},
		{name: "all three agree", replicas: 3,
			leases: leases(lease("main-2", "c:c1:Member"), lease("main-0", "a:c1:Leader"), lease("main-1", "b:c1:Member")),
			want:   "c1", wantFrom: []string{"main-0", "main-1", "main-2"}},
		{name: "a learner reports the cluster it was added to", replicas: 3,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-1", "b:c1:Learner")),
			want:   "c1", wantFrom: []string{"main-0", "main-1"}},
		{name: "IDs compared in canonical hex", replicas: 3,
			leases: leases(lease("main-0", "a:00C1:Leader"), lease("main-1", "b:c1:Member")),
			want:   "c1", wantFrom: []string{"main-0", "main-1"}},
		{name: "a single member", replicas: 1,
			leases: leases(lease("main-0", "a:c1:Leader")),
			want:   "c1", wantFrom: []string{"main-0"}},
		{name: "one of three is no majority", replicas: 3,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-1", "b:c1:Member").renewedAgo(16*time.Second), lease("main-2", "c:c1:Member").neverRenewed())},
		{name: "a Lease the Etcd does not control counts not", replicas: 3,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-1", "b:c1:Member").foreign())},
		{name: "no majority for either cluster", replicas: 3,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-1", "b:c2:Leader"), lease("main-2", "c:Member"))},
		{name: "a holder without cluster ID, malformed or of cluster 0 counts not", replicas: 5,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-1", "b:Member"), lease("main-2", "c1"), lease("main-3", "d:0:Member"), lease("main-4", "e:zz:Member"))},
		{name: "only spec.replicas' members count", replicas: 3,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-3", "d:c1:Member"), lease("other-1", "b:c1:Member"))},
		{name: "a majority of spec.replicas, not of the Leases there are", replicas: 5,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-1", "b:c1:Member"))},
		{name: "a renewal stamped a lease duration ahead is not believed", replicas: 3,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-1", "b:c1:Member").renewedAgo(-time.Hour))},
		{name: "renewed just now, or a little ahead, counts", replicas: 3,
			leases: leases(lease("main-0", "a:c1:Leader").renewedAgo(0), lease("main-1", "b:c1:Member").renewedAgo(-time.Second)),
			want:   "c1", wantFrom: []string{"main-0", "main-1"}},
		{name: "no members wanted", replicas: 0,
			leases: leases(lease("main-0", "a:c1:Leader"))},
		{name: "replicas the operator refuses", replicas: 2,
			leases: leases(lease("main-0", "a:c1:Leader"), lease("main-1", "b:c1:Member"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from := leaseClusterID(leaseEtcd(tc.replicas), tc.leases, leaseNow)
			if got != tc.want || !slices.Equal(from, tc.wantFrom) {
				t.Errorf("leaseClusterID() = %q from %v, want %q from %v", got, from, tc.want, tc.wantFrom)
			}
		})
	}
}
